"""Titles from the model: one short request of its own after a conversation's first answer.

A conversation the owner has not named is named by its first message at once (cut, by
`conversations.titles`). When an answer of it completes while the model has not named it
yet, the turn's end enqueues the job `conversation_title` after its commit
(`turns._finish_owned`); a worker runs it on the `default` queue, never the web process, so
the title neither waits for nor delays the turn. The job asks the model the conversation's
turns use now (the same provider, model and key) with `TITLE_INSTRUCTIONS`, at most 256
output tokens and 15 s, cleans the answer (`titles.conversation_title_from_model`) and
stores it unless the owner named the conversation meanwhile; every tab hears it through the
owner-wide `conversation_changed` frame. It claims the request before asking
(`Conversation.titled_at`), so a conversation costs one small request (and one more after
each edit of its first message, `versions._title_from_shown`) and a redelivered job asks
nothing. A request that fails or times out leaves the name the first message gave.

Regenerate (`POST /api/conversations/{id}/title/`) asks the same request for the owner, in
the web process as a key check does, and stores nothing: the rename box shows the title and
the owner saves it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from django.db import transaction
from django.utils import timezone

from conversations.errors import NothingToTitle, TitleUnavailable
from conversations.eventlog import owner_changed_send
from conversations.model_settings import TurnModel, turn_model_snapshot
from conversations.models import Conversation, ConversationState, MessageRole
from conversations.providers.base import ModelRequest, TextDelta
from conversations.providers.catalog import adapter_loaded
from conversations.providers.clients import clients_close
from conversations.providers.errors import ProviderError
from conversations.search import message_text, search_index_name
from conversations.selectors import conversation_require_active, shown_messages
from conversations.titles import TITLE_INSTRUCTIONS, conversation_title_from_model, title_request_text

logger = logging.getLogger(__name__)

# A title is about a dozen tokens; a reasoning model (OpenAI's) counts its thinking in this
# bound too, and with 32 it could spend them all before the title.
TITLE_MAX_TOKENS = 256
# Below the pages' 20 s bound on a call, so that Regenerate's answer always arrives.
TITLE_TIMEOUT_SECONDS = 15.0
# A model that goes on past a title is not read further.
_ANSWER_READ = 2_000
NO_TITLE = "The model gave no title. Try again."
TOO_SLOW = "The model did not give a title within 15 s. Try again."


def conversation_title_wanted(*, conversation_id: uuid.UUID) -> bool:
    """Whether the model is still to name this conversation (the owner has not, nor was it asked)."""
    return Conversation.objects.filter(id=conversation_id, titled_at__isnull=True, name_is_custom=False).exists()


def conversation_title_ask(*, conversation_id: uuid.UUID) -> str | None:
    """Have the model name a conversation after its first answer and store the title; return it, or None.

    The request is claimed first (a conditional update of `titled_at`): one job asks, once.
    None when it was claimed already, the owner named the conversation, or the model gave
    no title (the conversation keeps the name its first message gave).
    """
    claimed = Conversation.objects.filter(
        id=conversation_id, state=ConversationState.ACTIVE, name_is_custom=False, titled_at__isnull=True
    ).update(titled_at=timezone.now())
    if claimed != 1:
        return None
    try:
        title = _ask(conversation_id)
    except (NothingToTitle, TitleUnavailable) as error:
        logger.info("conversation %s keeps the title of its first message: %s", conversation_id, error.message)
        return None
    with transaction.atomic():
        named = Conversation.objects.filter(
            id=conversation_id, state=ConversationState.ACTIVE, name_is_custom=False
        ).update(name=title)
        if not named:
            return None
        search_index_name(conversation_id=conversation_id, name=title)
        transaction.on_commit(lambda: owner_changed_send(conversation_id=conversation_id, listed=True))
    return title


def conversation_title_suggest(*, conversation_id: uuid.UUID) -> str:
    """Ask the model for a title of an active conversation (Regenerate); nothing is stored."""
    conversation_require_active(conversation_id=conversation_id)
    return _ask(conversation_id)


def _ask(conversation_id: uuid.UUID) -> str:
    """The model's title for the conversation's first message and answer, cleaned."""
    first = list(shown_messages(conversation_id=conversation_id).values_list("role", "parts")[:2])
    if not first or first[0][0] != MessageRole.USER or not message_text(first[0][1]):
        raise NothingToTitle()
    answer = message_text(first[1][1]) if len(first) > 1 and first[1][0] == MessageRole.ASSISTANT else ""
    model = turn_model_snapshot()
    if model.problem is not None:
        raise TitleUnavailable(model.problem[1])
    text = title_request_text(message=message_text(first[0][1]), answer=answer)
    request = ModelRequest(
        system=TITLE_INSTRUCTIONS,
        transcript=[{"role": MessageRole.USER.value, "parts": [{"type": "text", "text": text}]}],
        max_tokens=TITLE_MAX_TOKENS,
    )
    # A loop of its own, on this thread (a job's slot, a request's thread): the SDK's
    # connection pool opens and closes with it.
    title = conversation_title_from_model(asyncio.run(_answered(model, request)))
    if title is None:
        raise TitleUnavailable(NO_TITLE)
    return title


async def _answered(model: TurnModel, request: ModelRequest) -> str:
    try:
        return await asyncio.wait_for(_answer(model, request), TITLE_TIMEOUT_SECONDS)
    except TimeoutError:
        raise TitleUnavailable(TOO_SLOW) from None
    except ProviderError as error:
        raise TitleUnavailable(error.message) from None
    finally:
        await clients_close()


async def _answer(model: TurnModel, request: ModelRequest) -> str:
    adapter = await adapter_loaded(model.provider)
    text = ""
    stream = adapter.stream(request, model=model.model, key=model.key)
    try:
        async for event in stream:
            if isinstance(event, TextDelta):
                text += event.text
                if len(text) > _ANSWER_READ:
                    break
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
    return text
