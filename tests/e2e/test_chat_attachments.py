"""Attachments on the chat page in real Chromium, at 1280 and 375 pixels: attach by the
button, paste an image, drop files, watch the upload's progress, remove a file before
sending, the page's limits (10 files, 20 MB a file, 100 MB in all: five files of 20 MB go)
and the server's type check, a send the server refuses giving its text and files back, a
message of only files that reaches the model, the thumbnail viewer by keyboard, and a reload
showing the same files.
"""

from __future__ import annotations

import base64
import contextlib
import re
import uuid
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from playwright.sync_api import FilePayload, Page, expect

from attachments.limits import FILE_MAX, MESSAGE_BYTES_MAX, MESSAGE_FILES_MAX
from attachments.models import Attachment
from attachments.storage import blob_path
from conversations.models import Message, MessageRole
from tests.attachments.support import png
from tests.e2e.chat_support import apply_look, conversations, no_sideways_scroll, open_conversation, sidebar_names
from tests.e2e.conftest import ANSWER_WITHIN_MS, HoldTheFirst, screenshot, until
from tests.support.fake_providers import FakeProviders, Text
from tests.support.live_clients import OwnerClient

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

WIDTHS = [pytest.param(1280, id="1280px"), pytest.param(375, id="375px")]
# Uploads slowed to ~1 MB/s in the browser (DevTools throttling) so the progress bar is seen.
SLOW_UPLOAD_BYTES_PER_SECOND = 1_000_000


def chips(page: Page):
    return page.locator("#attachments .attach-chip")


def chip(page: Page, name: str):
    return chips(page).filter(has=page.locator(".attach-name", has_text=name))


def attach_by_button(page: Page, *files: FilePayload) -> None:
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Attach files").click()
    chooser.value.set_files(list(files))


def attach_path_by_button(page: Page, path: Path) -> None:
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Attach files").click()
    chooser.value.set_files(path)


def text_file(name: str, content: bytes = b"some notes\n") -> FilePayload:
    return {"name": name, "mimeType": "text/plain", "buffer": content}


def slow_uploads(page: Page) -> None:
    client = page.context.new_cdp_session(page)
    client.send("Network.enable")
    client.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": SLOW_UPLOAD_BYTES_PER_SECOND},
    )


def put_files_in_the_page(page: Page, event: str, target: str, files: list[tuple[str, str, bytes]]) -> None:
    """Dispatch a paste or drop event carrying files, made in the page as a browser makes them."""
    page.evaluate(
        """([event, target, files]) => {
            const data = new DataTransfer();
            for (const [name, type, b64] of files) {
                const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
                data.items.add(new File([bytes], name, { type }));
            }
            const node = document.querySelector(target);
            const made = event === "paste"
                ? new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true })
                : new DragEvent(event, { dataTransfer: data, bubbles: true, cancelable: true });
            node.dispatchEvent(made);
        }""",
        [event, target, [[n, t, base64.b64encode(b).decode()] for n, t, b in files]],
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_files_attached_by_button_go_with_a_message_of_only_files_and_show_after_a_reload(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, width: int
) -> None:
    page = chat_page
    apply_look(page, (width, "light"))
    fake_providers.script([Text("A red square.")])
    conversation_id = live_owner.create_conversation("Files")
    open_conversation(page, conversation_id)
    slow_uploads(page)

    attach_by_button(page, text_file("big-notes.txt", b"n" * 2_000_000 + b"\n"))
    # While it uploads: its bar shows and Send waits.
    expect(chip(page, "big-notes.txt").locator("progress")).to_be_visible()
    expect(page.locator("#send")).to_be_disabled()
    expect(chip(page, "big-notes.txt")).to_have_attribute("data-state", "ready", timeout=30_000)
    expect(chip(page, "big-notes.txt").locator("progress")).to_have_count(0)
    expect(chip(page, "big-notes.txt")).to_contain_text("text/plain")
    expect(page.locator("#send")).to_be_enabled()

    attach_by_button(page, {"name": "square.png", "mimeType": "image/png", "buffer": png(8, 8)})
    expect(chip(page, "square.png")).to_have_attribute("data-state", "ready")
    expect(chip(page, "square.png")).to_contain_text("image/png")
    no_sideways_scroll(page)
    screenshot(page, f"chat-attachments-composer-{width}")

    # Remove one by keyboard before sending.
    chip(page, "big-notes.txt").get_by_role("button", name="Remove big-notes.txt").focus()
    page.keyboard.press("Enter")
    expect(chips(page)).to_have_count(1)

    page.locator("#composer-input").focus()
    page.keyboard.press("Enter")  # no text: the file alone is the message

    expect(chips(page)).to_have_count(0)
    user_files = page.locator("#transcript .msg.user .file-chip")
    expect(user_files).to_have_count(1)
    expect(page.locator("#transcript .msg.assistant").last).to_contain_text("A red square.")
    # The model was handed the image itself.
    [asked] = fake_providers.requests
    blocks = asked.body["messages"][-1]["content"]
    images = [b for b in blocks if b.get("type") == "image"]
    assert [i["source"]["data"] for i in images] == [base64.b64encode(png(8, 8)).decode()]
    assert not any("big-notes" in str(b) for b in blocks)

    # The thumbnail opens the viewer; Esc closes it and focus goes back.
    thumb = user_files.get_by_role("button", name="View square.png")
    expect(thumb.locator("img")).to_have_attribute("loading", "lazy")
    thumb.focus()
    page.keyboard.press("Enter")
    viewer = page.locator("#attachment-viewer")
    expect(viewer).to_be_visible()
    expect(viewer.locator("#attachment-viewer-name")).to_have_text("square.png")
    screenshot(page, f"chat-attachments-viewer-{width}")
    expect(viewer.get_by_role("link", name="Download")).to_have_attribute("href", re.compile(r"^/api/attachments/"))
    page.keyboard.press("Escape")
    expect(viewer).to_be_hidden()
    expect(thumb).to_be_focused()
    expect(page.locator("#transcript .msg.assistant").last).to_contain_text("A red square.")  # Esc stopped nothing
    # And its Close button, by keyboard.
    page.keyboard.press("Enter")
    expect(viewer).to_be_visible()
    viewer.get_by_role("button", name="Close").focus()
    page.keyboard.press("Enter")
    expect(viewer).to_be_hidden()
    expect(thumb).to_be_focused()

    link = user_files.get_by_role("link", name="square.png")
    href = link.get_attribute("href")
    page.reload()
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    expect(page.locator("#transcript .msg.user .file-chip")).to_have_count(1)
    expect(page.locator("#transcript .msg.user .file-chip").get_by_role("link", name="square.png")).to_have_attribute(
        "href", href or ""
    )
    expect(page.locator("#transcript .msg.user .file-chip")).to_contain_text("image/png")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_pasted_image_and_dropped_files_become_chips(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, width: int
) -> None:
    page = chat_page
    apply_look(page, (width, "dark"))
    conversation_id = live_owner.create_conversation("Paste")
    open_conversation(page, conversation_id)

    put_files_in_the_page(page, "paste", "#composer-input", [("image.png", "image/png", png())])
    expect(chip(page, "image.png")).to_have_attribute("data-state", "ready")
    expect(page.locator("#composer-input")).to_have_value("")

    drop = [("data.csv", "text/csv", b"a,b\n1,2\n"), ("readme.md", "text/markdown", b"# Hi\n")]
    put_files_in_the_page(page, "drop", "#transcript", drop)
    expect(chip(page, "data.csv")).to_have_attribute("data-state", "ready")
    expect(chip(page, "data.csv")).to_contain_text("text/csv")
    expect(chip(page, "readme.md")).to_contain_text("text/markdown")
    expect(chips(page)).to_have_count(3)
    no_sideways_scroll(page)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_page_refuses_the_eleventh_file_a_file_over_20_mb_and_what_the_server_refuses(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, tmp_path: Path, width: int
) -> None:
    page = chat_page
    apply_look(page, (width, "light"))
    conversation_id = live_owner.create_conversation("Limits")
    open_conversation(page, conversation_id)
    uploads: list[str] = []
    page.on("request", lambda r: uploads.append(r.url) if r.method == "POST" and "/attachments/" in r.url else None)

    too_big = tmp_path / "huge.txt"
    too_big.write_bytes(b"a" * FILE_MAX + b"\n")  # one byte over
    attach_path_by_button(page, too_big)
    expect(chip(page, "huge.txt")).to_have_attribute("data-state", "refused")
    expect(chip(page, "huge.txt").get_by_role("alert")).to_have_text("Not attached: a file may be at most 20 MB.")
    assert uploads == []  # refused before any upload
    chip(page, "huge.txt").get_by_role("button", name="Remove huge.txt").click()

    # HTML with an image's name: the server decides from the content and says why.
    html = b"<!doctype html><html><script>alert(1)</script></html>"
    said = httpx.post(
        f"{live_owner.live.base_url}/api/conversations/{conversation_id}/attachments/",
        files={"file": ("trap.png", html, "image/png")},
        headers={
            "Origin": live_owner.live.origin,
            "Cookie": f"{settings.SESSION_COOKIE_NAME}={live_owner.session_key}",
        },
    ).json()["error"]
    assert said["code"] == "unsupported_type"
    attach_by_button(page, {"name": "trap.png", "mimeType": "image/png", "buffer": html})
    expect(chip(page, "trap.png")).to_have_attribute("data-state", "refused")
    expect(chip(page, "trap.png").get_by_role("alert")).to_have_text(said["message"])
    chip(page, "trap.png").get_by_role("button", name="Remove trap.png").click()

    files = [text_file(f"note-{i:02}.txt") for i in range(MESSAGE_FILES_MAX + 1)]
    attach_by_button(page, *files)
    expect(chips(page).and_(page.locator('[data-state="ready"]'))).to_have_count(MESSAGE_FILES_MAX)
    eleventh = chip(page, f"note-{MESSAGE_FILES_MAX:02}.txt")
    expect(eleventh).to_have_attribute("data-state", "refused")
    expect(eleventh.get_by_role("alert")).to_have_text(f"Not attached: at most {MESSAGE_FILES_MAX} files a message.")

    # Send: the ten go, the refused one is not sent.
    page.locator("#composer-input").fill("Ten notes")
    page.locator("#composer-input").press("Enter")
    expect(page.locator("#transcript .msg.user .file-chip")).to_have_count(MESSAGE_FILES_MAX)
    expect(chips(page)).to_have_count(0)
    no_sideways_scroll(page)


def test_another_tab_shows_the_files_and_an_answer_shows_the_files_it_brought_back(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    fake_providers.script([Text("Here is the chart.")])
    conversation_id = live_owner.create_conversation("Two tabs")
    open_conversation(page, conversation_id)
    other = page.context.new_page()
    open_conversation(other, conversation_id)

    attach_by_button(page, {"name": "shot.png", "mimeType": "image/png", "buffer": png()})
    expect(chip(page, "shot.png")).to_have_attribute("data-state", "ready")
    page.locator("#composer-input").fill("What is this?")
    page.locator("#composer-input").press("Enter")

    # The other tab shows the message's file as it arrives, as the sending tab does.
    expect(other.locator("#transcript .msg.user .bubble")).to_have_text("What is this?")
    expect(other.locator("#transcript .msg.user .file-chip").get_by_role("link", name="shot.png")).to_be_visible()
    expect(other.locator("#transcript .msg.assistant").last).to_contain_text("Here is the chart.")
    other.close()

    # An answer's own files (the shell's /workspace/out/) come as attachment parts of it.
    chart = httpx.post(
        f"{live_owner.live.base_url}/api/conversations/{conversation_id}/attachments/",
        files={"file": ("chart.png", png(4, 4), "image/png")},
        headers={
            "Origin": live_owner.live.origin,
            "Cookie": f"{settings.SESSION_COOKIE_NAME}={live_owner.session_key}",
        },
    ).json()
    answer = Message.objects.get(conversation_id=conversation_id, role=MessageRole.ASSISTANT)
    answer.parts = [
        *answer.parts,
        {"type": "attachment", **{k: chart[k] for k in ("id", "name", "media_type", "size")}},
    ]
    answer.save(update_fields=["parts"])
    page.reload()
    files = page.locator("#transcript .msg.assistant .file-chip")
    expect(files.get_by_role("link", name="chart.png")).to_have_attribute("href", f"/api/attachments/{chart['id']}/")
    files.get_by_role("button", name="View chart.png").click()
    expect(page.locator("#attachment-viewer #attachment-viewer-name")).to_have_text("chart.png")
    page.keyboard.press("Escape")
    expect(page.locator("#attachment-viewer")).to_be_hidden()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_file_attached_in_a_new_chat_goes_with_its_first_message(
    chat_page: Page, anthropic_key: str, fake_providers: FakeProviders, width: int
) -> None:
    page = chat_page
    apply_look(page, (width, "light"))
    fake_providers.script([Text("Two notes.")])
    page.goto("/")
    expect(page.locator("#connection")).not_to_have_attribute("data-state", "connecting")
    page.keyboard.press("Control+Shift+O")  # New chat: no conversation exists until something is sent

    attach_by_button(page, text_file("notes.txt", b"Buy milk.\nCall Ann.\n"))
    expect(chip(page, "notes.txt")).to_have_attribute("data-state", "ready")
    page.locator("#composer-input").fill("Summarise these notes.")
    page.locator("#composer-input").press("Enter")

    expect(chips(page)).to_have_count(0)
    expect(page.locator("#transcript .msg.user .file-chip")).to_have_count(1)
    expect(page.locator("#transcript .msg.user .file-chip")).to_contain_text("notes.txt")
    expect(page.locator("#transcript .msg.assistant").last).to_contain_text("Two notes.")
    expect(page.locator("#conversation-list .conversation")).to_have_count(1)  # one conversation, not one per step
    [asked] = fake_providers.requests
    said = str(asked.body["messages"][-1]["content"])
    assert "Summarise these notes." in said
    assert "Call Ann." in said  # the text file went inline
    [message] = Message.objects.filter(role=MessageRole.USER)
    assert [p["name"] for p in message.parts if p["type"] == "attachment"] == ["notes.txt"]


def test_a_new_chat_creates_no_conversation_for_a_file_and_leaves_nothing_once_it_is_removed(
    chat_page: Page, live_owner: OwnerClient
) -> None:
    page = chat_page
    page.goto("/")
    expect(page.locator("#connection")).not_to_have_attribute("data-state", "connecting")

    attach_by_button(page, text_file("notes.txt", b"Buy milk.\n"))
    expect(chip(page, "notes.txt")).to_have_attribute("data-state", "ready")

    # Uploaded, to no conversation: none is listed, in the sidebar or by the server.
    expect(page).to_have_url(re.compile(r"/$"))
    expect(sidebar_names(page)).to_have_count(0)
    assert conversations(live_owner) == []
    [upload] = Attachment.objects.all()
    assert upload.conversation_id is None
    page.get_by_role("button", name="Remove notes.txt").click()

    expect(chips(page)).to_have_count(0)
    until(page, lambda: not Attachment.objects.exists(), "the removed upload is deleted")
    until(page, lambda: not blob_path(upload.sha256).exists(), "its stored file is deleted")
    assert conversations(live_owner) == []
    expect(sidebar_names(page)).to_have_count(0)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_send_the_server_refuses_puts_its_text_and_files_back(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, width: int
) -> None:
    page = chat_page
    apply_look(page, (width, "light"))
    fake_providers.script([Text("Sent from elsewhere.")], [Text("Without the file.")])
    conversation_id = live_owner.create_conversation("Refused")
    open_conversation(page, conversation_id)
    attach_by_button(page, text_file("plan.txt", b"Step one.\n"))
    expect(chip(page, "plan.txt")).to_have_attribute("data-state", "ready")

    # Another client sends the same upload first: it may not go with a second message.
    [attachment] = Attachment.objects.filter(name="plan.txt")
    sent = live_owner.api(
        "POST",
        f"/api/conversations/{conversation_id}/messages/",
        json={"request_id": str(uuid.uuid4()), "text": "Elsewhere", "attachments": [str(attachment.id)]},
    )
    assert sent.status_code == 202, sent.text
    expect(page.locator("#transcript .msg.assistant").last).to_contain_text("Sent from elsewhere.")

    page.locator("#composer-input").fill("Here is my plan")
    page.locator("#composer-input").press("Enter")
    expect(page.locator("#composer-error")).to_have_text(
        "attachments: not uploaded to this conversation, or sent with another message."
    )
    # What was typed and attached is back, and the refused message is not in the transcript.
    expect(page.locator("#composer-input")).to_have_value("Here is my plan")
    expect(chip(page, "plan.txt")).to_have_attribute("data-state", "ready")
    expect(page.locator("#transcript .msg.user")).to_have_count(1)
    no_sideways_scroll(page)

    chip(page, "plan.txt").get_by_role("button", name="Remove plan.txt").click()
    page.locator("#composer-input").press("Enter")
    expect(page.locator("#transcript .msg.assistant").last).to_contain_text("Without the file.")
    expect(page.locator("#transcript .msg.user")).to_have_count(2)
    expect(page.locator("#transcript .msg.user").last.locator(".file-chip")).to_have_count(0)
    assert Message.objects.filter(role=MessageRole.USER).count() == 2


def test_five_files_of_20_mb_go_together_and_one_byte_more_is_refused(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, tmp_path: Path
) -> None:
    page = chat_page
    apply_look(page, (1280, "light"))
    fake_providers.script([Text("Five logs.")])
    conversation_id = live_owner.create_conversation("Big files")
    open_conversation(page, conversation_id)
    paths = []
    for i in range(MESSAGE_BYTES_MAX // FILE_MAX):
        path = tmp_path / f"log-{i}.txt"
        path.write_bytes(b"x" * (FILE_MAX - 1) + b"\n")  # each exactly 20 MB
        paths.append(path)
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Attach files").click()
    chooser.value.set_files(paths)
    expect(chips(page).and_(page.locator('[data-state="ready"]'))).to_have_count(5, timeout=120_000)

    attach_by_button(page, text_file("one-more.txt", b"\n"))  # 100 MB and one byte in all
    expect(chip(page, "one-more.txt")).to_have_attribute("data-state", "refused")
    expect(chip(page, "one-more.txt").get_by_role("alert")).to_have_text(
        "Not attached: the files of a message may be at most 100 MB in all."
    )

    page.locator("#composer-input").fill("Five logs")
    page.locator("#composer-input").press("Enter")
    expect(page.locator("#transcript .msg.user .file-chip")).to_have_count(5)
    expect(page.locator("#transcript .msg.assistant").last).to_contain_text("Five logs.", timeout=60_000)
    [message] = Message.objects.filter(role=MessageRole.USER)
    sent = Attachment.objects.filter(message=message)
    assert sum(a.size for a in sent) == MESSAGE_BYTES_MAX
    assert sorted(a.name for a in sent) == [f"log-{i}.txt" for i in range(5)]


@pytest.mark.parametrize("width", WIDTHS)
def test_an_upload_the_server_never_answers_fails_in_time_and_retry_sends_it_again(
    chat_page: Page, live_owner: OwnerClient, width: int
) -> None:
    page = chat_page
    apply_look(page, (width, "light"))
    conversation_id = live_owner.create_conversation("Held upload")
    hang = HoldTheFirst()  # the server "hangs" on this upload
    held = hang.held
    page.route(f"**/api/conversations/{conversation_id}/attachments/", hang)
    page.clock.install()
    open_conversation(page, conversation_id)

    attach_by_button(page, text_file("held.txt"))
    until(page, lambda: bool(held), "the upload to go out")
    expect(chip(page, "held.txt")).to_have_attribute("data-state", "uploading")
    page.clock.fast_forward(ANSWER_WITHIN_MS)  # the page's clock reaches the bound every page call has

    expect(chip(page, "held.txt")).to_have_attribute("data-state", "refused")
    expect(chip(page, "held.txt").get_by_role("alert")).to_have_text(
        "Not attached: the server did not answer within 20 s."
    )
    screenshot(page, f"attach-not-answered-{width}")
    chip(page, "held.txt").get_by_role("button", name="Retry held.txt").click()

    expect(chip(page, "held.txt")).to_have_attribute("data-state", "ready")
    with contextlib.suppress(Exception):  # the abandoned upload's late answer changes nothing
        held[0].continue_()
    assert Attachment.objects.filter(name="held.txt").count() >= 1
    page.locator("#composer-input").fill("The held file")
    page.locator("#composer-input").press("Enter")
    expect(page.locator("#transcript .msg.user .file-chip")).to_have_count(1)
    expect(chips(page)).to_have_count(0)


def test_a_text_file_named_like_a_page_saves_as_text_from_its_chip(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    """A page named `.html` whose markup starts after its first bytes saves as `.txt`: opened, it is text."""
    page = chat_page
    fake_providers.script([Text("Noted.")])
    open_conversation(page, live_owner.create_conversation("Saved pages"))
    late_markup = b"Notes from the meeting.\n" * 100 + b"<script>alert('ran')</script>\n"

    attach_by_button(page, {"name": "page.html", "mimeType": "text/html", "buffer": late_markup})
    expect(chip(page, "page.html")).to_have_attribute("data-state", "ready")
    page.locator("#composer-input").press("Enter")
    link = page.locator("#transcript .msg.user .file-chip").get_by_role("link", name="page.html")
    expect(link).to_be_visible()

    with page.expect_download() as saving:
        link.click()

    saved = saving.value
    assert saved.suggested_filename == "page.html.txt"
    assert Path(saved.path()).read_bytes() == late_markup
