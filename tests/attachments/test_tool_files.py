"""Files a tool call returns, stored as attachments of the turn's answer: once per call and name."""

from __future__ import annotations

import uuid

import pytest

from attachments.errors import AttachmentTooLarge, UnsupportedType
from attachments.limits import FILE_MAX
from attachments.models import Attachment
from attachments.storage import blob_path
from attachments.tool_files import attachment_from_tool, attachments_for_sandbox
from conversations import services as conversations
from conversations.models import Message, MessageRole
from conversations.turns import turn_submit
from tests.attachments.support import png, upload

pytestmark = [pytest.mark.django_db, pytest.mark.database]


@pytest.fixture
def answered(owner):
    """A conversation with a turn and its (empty) answer message, as the engine prepares it."""
    conversation = conversations.conversation_create(name="Files")
    turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="Make a chart")
    Message.objects.create(
        conversation=conversation, turn=turn, role=MessageRole.ASSISTANT, ordinal=turn.ordinal * 2 + 1, parts=[]
    )
    return conversation, turn


def test_a_call_run_again_stores_its_file_once(answered):
    conversation, turn = answered
    stored = [
        attachment_from_tool(
            conversation_id=conversation.id, turn_id=turn.id, tool_call_id="c1", name="chart.png", data=png()
        )
        for _ in range(2)
    ]

    assert stored[0].id == stored[1].id
    [row] = Attachment.objects.filter(conversation=conversation)
    assert (row.name, row.media_type, row.size, row.tool_call_id) == ("chart.png", "image/png", len(png()), "c1")
    assert row.message.role == MessageRole.ASSISTANT
    assert blob_path(row.sha256).read_bytes() == png()


def test_another_call_of_the_same_content_has_its_own_row_and_shares_the_blob(answered):
    conversation, turn = answered
    first = attachment_from_tool(
        conversation_id=conversation.id, turn_id=turn.id, tool_call_id="c1", name="a.txt", data=b"same\n"
    )
    second = attachment_from_tool(
        conversation_id=conversation.id, turn_id=turn.id, tool_call_id="c2", name="a.txt", data=b"same\n"
    )

    assert first.id != second.id
    assert first.sha256 == second.sha256


def test_a_returned_text_file_named_as_a_page_downloads_as_text_under_a_txt_name(answered, owner_client):
    conversation, turn = answered
    page = b"Report.\n" * 300 + b"<html><script>alert(document.cookie)</script></html>\n"
    stored = attachment_from_tool(
        conversation_id=conversation.id, turn_id=turn.id, tool_call_id="c1", name="report.html", data=page
    )
    assert (stored.name, stored.media_type) == ("report.html", "text/plain")

    served = owner_client.get(f"/api/attachments/{stored.id}/")

    assert b"".join(served.streaming_content) == page
    assert served["Content-Type"] == "text/plain; charset=utf-8"
    assert served["Content-Disposition"] == 'attachment; filename="report.html.txt"'
    assert served["X-Content-Type-Options"] == "nosniff"


def test_a_refused_type_or_size_stores_nothing(answered):
    conversation, turn = answered
    with pytest.raises(UnsupportedType):
        attachment_from_tool(
            conversation_id=conversation.id, turn_id=turn.id, tool_call_id="c1", name="x.png", data=b"<html>hi</html>"
        )
    with pytest.raises(AttachmentTooLarge):
        attachment_from_tool(
            conversation_id=conversation.id,
            turn_id=turn.id,
            tool_call_id="c1",
            name="x.txt",
            data=b"a" * (FILE_MAX + 1),
        )

    assert not Attachment.objects.exists()


def test_the_sandbox_gets_sent_attachments_newest_first_within_its_bound(owner_client):
    conversation = conversations.conversation_create(name="Files")
    ids = [upload(owner_client, conversation.id, f"{n}.txt", b"x" * 10 + b"\n").json()["id"] for n in range(3)]
    unsent = upload(owner_client, conversation.id, "draft.txt", b"draft\n").json()["id"]
    turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="", attachments=ids)

    kept, left = attachments_for_sandbox(conversation_id=conversation.id, bytes_max=22)

    assert [a.name for a in kept] == ["2.txt", "1.txt"]
    assert [a.name for a in left] == ["0.txt"]
    assert unsent not in {str(a.id) for a in kept + left}
