"""Conversation services: create, rename, and the two-phase delete with its teardown."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from conversations import selectors, services
from conversations.models import Conversation, ConversationState
from conversations.signals import conversation_torn_down
from flarebot.core.errors import InvalidInput, NotFound
from tools.models import WriteProposal

pytestmark = pytest.mark.database


@pytest.fixture
def torn_down() -> Iterator[list[uuid.UUID]]:
    """Record every conversation id the teardown signal is sent for."""
    received: list[uuid.UUID] = []

    def receiver(sender: object, conversation_id: uuid.UUID, **kwargs: object) -> None:
        # The signal is sent before the row disappears, so receivers can still read it.
        assert Conversation.objects.filter(id=conversation_id, state=ConversationState.DELETING).exists()
        received.append(conversation_id)

    conversation_torn_down.connect(receiver, dispatch_uid="test-services-torn-down")
    try:
        yield received
    finally:
        conversation_torn_down.disconnect(dispatch_uid="test-services-torn-down")


def test_it_creates_a_conversation_named_new_conversation_by_default(db):
    conversation = services.conversation_create()

    assert Conversation.objects.get(id=conversation.id).name == "New conversation"
    assert conversation.state == ConversationState.ACTIVE


def test_it_refuses_an_invalid_name_before_storing_anything(db):
    with pytest.raises(InvalidInput):
        services.conversation_create(name="\x00")

    assert not Conversation.objects.exists()


def test_it_does_not_rename_a_conversation_being_deleted(db):
    conversation = services.conversation_create(name="Old name")
    services.conversation_delete(conversation_id=conversation.id)

    with pytest.raises(NotFound):
        services.conversation_rename(conversation_id=conversation.id, name="New name")

    assert Conversation.objects.get().name == "Old name"


def test_it_makes_a_deleted_conversation_inaccessible_before_teardown(db, torn_down):
    conversation = services.conversation_create(name="Secret plans")
    kept = services.conversation_create(name="Kept")

    services.conversation_delete(conversation_id=conversation.id)

    stored = Conversation.objects.get(id=conversation.id)
    assert stored.state == ConversationState.DELETING
    assert stored.deletion_requested_at is not None
    assert list(selectors.conversation_list()) == [kept]
    assert selectors.conversation_get_active(conversation_id=conversation.id) is None
    assert torn_down == []


def test_it_enqueues_the_teardown_only_after_commit(db, django_capture_on_commit_callbacks):
    conversation = services.conversation_create(name="Secret plans")

    with django_capture_on_commit_callbacks(execute=False) as deleted:
        services.conversation_delete(conversation_id=conversation.id)
    with django_capture_on_commit_callbacks(execute=False) as absent:
        services.conversation_delete(conversation_id=uuid.uuid4())

    assert len(deleted) == 1
    assert absent == []


def test_it_tears_a_deleted_conversation_down(db, torn_down):
    conversation = services.conversation_create(name="Secret plans")
    kept = services.conversation_create(name="Kept")
    services.conversation_delete(conversation_id=conversation.id)

    assert services.conversation_teardown(conversation_id=conversation.id) is True

    assert torn_down == [conversation.id]
    assert list(Conversation.objects.all()) == [kept]


def test_it_tears_down_idempotently(db, torn_down):
    conversation = services.conversation_create(name="Secret plans")
    services.conversation_delete(conversation_id=conversation.id)
    services.conversation_teardown(conversation_id=conversation.id)

    assert services.conversation_teardown(conversation_id=conversation.id) is False
    services.conversation_delete(conversation_id=conversation.id)

    assert torn_down == [conversation.id]
    assert not Conversation.objects.exists()


def test_it_never_tears_down_an_active_conversation(db, torn_down):
    conversation = services.conversation_create(name="Still in use")

    assert services.conversation_teardown(conversation_id=conversation.id) is False

    assert torn_down == []
    assert Conversation.objects.get().state == ConversationState.ACTIVE


def test_it_finishes_interrupted_deletions(db, torn_down):
    interrupted = [services.conversation_create(name=f"Interrupted {n}") for n in range(2)]
    active = services.conversation_create(name="Active")
    for conversation in interrupted:
        services.conversation_delete(conversation_id=conversation.id)

    assert services.conversations_finish_deletions() == 2

    assert sorted(torn_down) == sorted(c.id for c in interrupted)
    assert list(Conversation.objects.all()) == [active]
    assert services.conversations_finish_deletions() == 0
    assert len(torn_down) == 2


def test_it_keeps_a_repeated_delete_from_moving_the_deletion_time(db):
    conversation = services.conversation_create(name="Secret plans")
    services.conversation_delete(conversation_id=conversation.id)
    first = Conversation.objects.get().deletion_requested_at

    services.conversation_delete(conversation_id=conversation.id)

    assert Conversation.objects.get().deletion_requested_at == first


def test_a_deleted_conversations_proposed_writes_go_with_it(db, torn_down):
    conversation = services.conversation_create(name="Read the web")
    kept = services.conversation_create(name="Kept")
    for owner in (conversation, kept):
        WriteProposal.objects.create(
            conversation_id=owner.id,
            turn_id=uuid.uuid4(),
            tool_call_id="m1",
            tool="remember",
            input={"content": "A secret fact."},
            readback={"title": "Remember a new fact", "lines": ["A secret fact."]},
        )
    services.conversation_delete(conversation_id=conversation.id)

    assert services.conversation_teardown(conversation_id=conversation.id) is True

    assert list(WriteProposal.objects.values_list("conversation_id", flat=True)) == [kept.id]
