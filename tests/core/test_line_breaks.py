"""One rule for line breaks: `\r\n` and a lone `\r` become `\n` wherever text enters.

Memory facts and task instructions used to refuse `\r\n` ("only tabs and line breaks may
be control characters") while the owner's instructions and browser-task replies kept it.
Now each entry stores `\n` and counts its limit after the change (the exact limit passes
with Windows line breaks, one character more fails).
"""

from __future__ import annotations

import uuid

import pytest

from conversations import instructions
from conversations.browser_tasks import services as browser_tasks
from conversations.browser_tasks.services import Reply
from conversations.models import Message
from conversations.services import conversation_create
from conversations.turns import turn_submit
from flarebot.core.errors import FlarebotError
from flarebot.core.text import line_breaks_normalize
from memory import services as memory
from tasks import services as tasks
from tests.support.browser_tasks import paused_task

pytestmark = pytest.mark.django_db

WINDOWS = "first line\r\nsecond line\rthird line"
UNIX = "first line\nsecond line\nthird line"


@pytest.mark.parametrize(
    ("raw", "normal"),
    [("a\r\nb", "a\nb"), ("a\rb", "a\nb"), ("a\r\r\nb", "a\n\nb"), ("a\n\rb", "a\n\nb"), ("a\tb\n", "a\tb\n")],
)
def test_every_line_break_becomes_a_newline(raw, normal):
    assert line_breaks_normalize(raw) == normal


def test_a_fact_with_windows_line_breaks_is_stored_with_newlines(owner):
    fact = memory.fact_create(content=WINDOWS)

    assert fact.content == UNIX


def test_a_fact_counts_its_limit_after_the_change(owner):
    at_limit = "a\r\n" * (memory.MAX_CONTENT // 2)  # 1,000 once each \r\n is one \n

    assert len(memory.fact_create(content=at_limit).content) == memory.MAX_CONTENT
    with pytest.raises(FlarebotError, match="at most 1,000"):
        memory.fact_create(content=at_limit + "b")


def test_a_fact_edit_stores_newlines(owner):
    fact = memory.fact_create(content="one")

    assert memory.fact_update(fact_id=fact.id, content=WINDOWS, version=fact.version).content == UNIX


def test_task_instructions_with_windows_line_breaks_are_stored_with_newlines(owner):
    assert tasks.instructions_clean(WINDOWS) == UNIX
    at_limit = "a\r" * (tasks.INSTRUCTIONS_MAX // 2)
    assert len(tasks.instructions_clean(at_limit)) == tasks.INSTRUCTIONS_MAX
    with pytest.raises(FlarebotError, match="at most 8,000"):
        tasks.instructions_clean(at_limit + "b")


def test_the_owners_instructions_are_stored_with_newlines(owner):
    view = instructions.instructions_set(text=WINDOWS)

    assert view["effective"] == UNIX
    at_limit = "a\r\n" * (instructions.MAX_UTF16 // 2)
    assert instructions.instructions_set(text=at_limit)["effective"] == "a\n" * (instructions.MAX_UTF16 // 2)
    with pytest.raises(FlarebotError, match="at most 16000"):
        instructions.instructions_set(text=at_limit + "b")


def test_a_message_is_stored_with_newlines(owner):
    conversation = conversation_create()

    turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text=WINDOWS)

    [message] = Message.objects.filter(turn_id=turn.id)
    assert message.parts[0]["text"] == UNIX


def test_a_browser_task_proposal_and_an_answer_are_stored_with_newlines(owner):
    conversation = conversation_create().id
    proposal = browser_tasks.browser_task_propose(
        conversation_id=conversation,
        turn_id=uuid.uuid4(),
        tool_call_id="call-1",
        goal=WINDOWS,
        start_url="https://shop.example/",
        restrictions=["no\r\npayment"],
    )
    assert (proposal.goal, proposal.restrictions) == (UNIX, ["no\npayment"])

    _task, point = paused_task(conversation)
    browser_tasks.critical_point_answer(conversation_id=conversation, reply=Reply(str(point.id), response=WINDOWS))

    point.refresh_from_db()
    assert point.response == UNIX
