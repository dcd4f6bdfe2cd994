"""Attachments as each provider's API takes them, sent by the real SDKs to the loopback providers."""

from __future__ import annotations

import base64
import io
import uuid

import pytest
from pypdf import PdfReader

from attachments import content
from attachments.models import Delivery
from conversations.models import Message, Turn
from conversations.turns import turn_submit
from tests.attachments.support import pdf, png, upload
from tests.support.engine import new_conversation, orm, provider_use, run
from tests.support.fake_providers import Text

pytestmark = pytest.mark.django_db(transaction=True)

PAGES = [f"Page {n} says {n * 7}" for n in range(1, 26)]


@pytest.fixture(params=["anthropic", "openai", "local"])
def provider(request, owner, settings, fake_providers):
    return provider_use(request.param, settings=settings, fake_providers=fake_providers)


async def send_files(owner_client, cancels, text: str = "What do these say?"):
    conversation_id = await new_conversation()
    files = [("shot.png", png()), ("report.pdf", pdf(PAGES)), ("notes.md", b"# Notes\n\nBuy milk.\n")]
    ids = []
    for name, data in files:
        response = await orm(upload)(owner_client, conversation_id, name, data)
        ids.append(response.json()["id"])
    submit = orm(turn_submit)
    turn, _ = await submit(conversation_id=conversation_id, request_id=uuid.uuid4(), text=text, attachments=ids)
    await run(turn.id, cancels)
    return turn, ids


async def test_each_provider_gets_the_files_its_way(provider, owner_client, fake_providers, cancels):
    fake_providers.script([Text("A red square, a report and a list.")])

    turn, ids = await send_files(owner_client, cancels)

    assert (await orm(Turn.objects.get)(id=turn.id)).status == "completed"
    body = fake_providers.requests[-1].body
    if provider.name == "anthropic":
        blocks = body["messages"][-1]["content"]
        assert [b["type"] for b in blocks] == ["text", "text", "image", "text", "document", "text"]
        assert blocks[0] == {"type": "text", "text": "What do these say?"}
        image = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png()).decode()}
        assert blocks[2]["source"] == image
        assert blocks[4]["source"]["media_type"] == "application/pdf"
        assert blocks[4]["title"] == "report.pdf"
        shown = PdfReader(io.BytesIO(base64.b64decode(blocks[4]["source"]["data"])))
        assert len(shown.pages) == 20  # the rest through read_attachment
        assert "Page 20 says 140" in shown.pages[19].extract_text()
        assert "Pages 1-20 of 25" in blocks[3]["text"]
        assert ids[1] in blocks[3]["text"]
        assert "Buy milk." in blocks[5]["text"]
    elif provider.name == "openai":
        parts = body["messages"][-1]["content"]
        assert [p["type"] for p in parts] == ["text", "text", "image_url", "text", "text"]
        assert parts[2]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(png()).decode()
        assert "--- page 20 ---\nPage 20 says 140" in parts[3]["text"]
        assert "Page 21" not in parts[3]["text"]
        assert "pages 1-20 of 25" in parts[3]["text"]
        assert "read_attachment" in parts[3]["text"]
        assert "Buy milk." in parts[4]["text"]
    else:
        message = body["messages"][-1]["content"]
        assert isinstance(message, str)  # no content parts: a local server may take none
        assert message.startswith("What do these say?")
        assert '"shot.png"' in message
        assert "not shown: this model does not take images" in message
        assert "--- page 1 ---\nPage 1 says 7" in message
        assert "Buy milk." in message
        assert base64.b64encode(png()).decode() not in message


async def test_a_message_of_files_alone_sends_no_empty_text(provider, owner_client, fake_providers, cancels):
    fake_providers.script([Text("Seen.")])

    await send_files(owner_client, cancels, text="")

    body = fake_providers.requests[-1].body
    if provider.name == "anthropic":
        assert all(b.get("text") != "" for b in body["messages"][-1]["content"])
        assert body["messages"][-1]["content"][0]["text"].startswith('[Attached file "shot.png"')
    elif provider.name == "openai":
        assert body["messages"][-1]["content"][0]["text"].startswith('[Attached file "shot.png"')
    else:
        assert body["messages"][-1]["content"].startswith('[Attached file "shot.png"')


async def test_a_turn_keeps_the_way_it_chose_for_its_retries(anthropic, owner_client, fake_providers, cancels):
    fake_providers.script([Text("Seen.")])
    turn, ids = await send_files(owner_client, cancels)
    chosen = await orm(lambda: dict(Delivery.objects.filter(turn_id=turn.id).values_list("attachment_id", "mode")))()
    assert chosen == {uuid.UUID(ids[0]): "image", uuid.UUID(ids[1]): "document", uuid.UUID(ids[2]): "text"}

    # The settings now name a local model: a retry of this turn keeps what it chose,
    # handing each file over as near to it as that model takes.
    parts = await orm(lambda: Message.objects.get(turn_id=turn.id, role="user").parts)()
    again = await orm(content.transcript_with_attachments)(
        turn_id=turn.id,
        conversation_id=turn.conversation_id,
        provider="local",
        transcript=[{"role": "user", "parts": parts}],
    )
    after = await orm(lambda: dict(Delivery.objects.filter(turn_id=turn.id).values_list("attachment_id", "mode")))()
    assert after == chosen
    assert [p.get("mode") for p in again[0]["parts"]] == [None, "note", "text", "text"]
