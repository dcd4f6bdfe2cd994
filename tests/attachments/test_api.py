"""Uploading and serving attachments, as docs/protocol.md "Attachments" describes; refused input stores nothing."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest

from attachments.limits import FILE_MAX
from attachments.models import Attachment
from attachments.storage import blob_path, tmp_dir
from conversations import services as conversations
from conversations.turns import turn_submit
from tests.attachments.support import pdf, png, upload

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(owner):
    return conversations.conversation_create(name="Files")


def assert_error(response, status: int, code: str) -> None:
    assert response.status_code == status, response.content
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["message"]


def assert_nothing_stored() -> None:
    assert Attachment.objects.count() == 0
    assert list(tmp_dir().iterdir()) == []


def test_it_uploads_a_png_and_serves_it_inline_to_the_owner(owner_client, conversation):
    content = png()
    response = upload(owner_client, conversation.id, "shot.png", content)

    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"id", "name", "media_type", "size", "sha256"}
    assert body["name"] == "shot.png"
    assert body["media_type"] == "image/png"
    assert body["size"] == len(content)
    assert body["sha256"] == hashlib.sha256(content).hexdigest()
    assert blob_path(body["sha256"]).read_bytes() == content
    served = owner_client.get(f"/api/attachments/{body['id']}/")
    assert served.status_code == 200
    assert b"".join(served.streaming_content) == content
    assert served["Content-Type"] == "image/png"
    assert served["Content-Disposition"].startswith("inline")
    assert served["X-Content-Type-Options"] == "nosniff"
    assert served["Content-Security-Policy"] == "sandbox; default-src 'none'"


def test_it_serves_other_files_as_downloads(owner_client, conversation):
    body = upload(owner_client, conversation.id, "notes.md", b"# Notes\n\nhello\n").json()
    assert body["media_type"] == "text/markdown"

    served = owner_client.get(f"/api/attachments/{body['id']}/")

    assert served["Content-Type"] == "text/markdown; charset=utf-8"
    assert served["Content-Disposition"] == 'attachment; filename="notes.md"'
    assert served["Content-Security-Policy"] == "sandbox; default-src 'none'"


# Plain notes with a page after them: the first bytes say text, so the upload is stored as text.
LATE_PAGE = b"Notes from the meeting.\n" * 100 + b"<html><body><script>alert(document.cookie)</script></body></html>\n"


def test_a_text_file_named_as_a_page_downloads_as_text_under_a_txt_name(owner_client, conversation):
    assert len(LATE_PAGE) > 2048
    body = upload(owner_client, conversation.id, "page.html", LATE_PAGE).json()
    assert (body["name"], body["media_type"]) == ("page.html", "text/plain")

    served = owner_client.get(f"/api/attachments/{body['id']}/")

    assert b"".join(served.streaming_content) == LATE_PAGE
    assert served["Content-Type"] == "text/plain; charset=utf-8"
    assert served["Content-Disposition"] == 'attachment; filename="page.html.txt"'
    assert served["X-Content-Type-Options"] == "nosniff"
    assert served["Content-Security-Policy"] == "sandbox; default-src 'none'"
    # Only the download's name changes: the transcript shows the name the owner gave.
    turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="", attachments=[body["id"]])
    messages = owner_client.get(f"/api/conversations/{conversation.id}/messages/").json()["messages"]
    assert [(p["name"], p["media_type"]) for p in messages[-1]["parts"] if p["type"] == "attachment"] == [
        ("page.html", "text/plain")
    ]


@pytest.mark.parametrize(
    ("name", "content", "disposition"),
    [
        ("notes.txt", b"notes\n", 'attachment; filename="notes.txt"'),
        ("NOTES.TXT", b"notes\n", 'attachment; filename="NOTES.TXT"'),
        ("README", b"plain words\n", 'attachment; filename="README.txt"'),
        ("main.py", b"print('<html>')\n", 'attachment; filename="main.py.txt"'),
        ("image.svg", b"A drawing.\n<svg onload=alert(1)/>\n", 'attachment; filename="image.svg.txt"'),
        ("data.csv", b"a,b\n1,2\n", 'attachment; filename="data.csv"'),
        ("data.json", b'{"a": 1}', 'attachment; filename="data.json"'),
        ("scan.pdf", pdf(["one"]), 'attachment; filename="scan.pdf"'),
        ("shot.png", png(), 'inline; filename="shot.png"'),
        ("photo.JPEG", b"\xff\xd8\xff\xe0" + b"\x00" * 32, 'inline; filename="photo.JPEG"'),
        # The content decides the type, and the name it downloads under ends in that type's extension.
        ("poly.html", b"GIF89a/*<html><script>alert(1)</script>*/", 'inline; filename="poly.html.gif"'),
        ("photo.pdf", png(), 'inline; filename="photo.pdf.png"'),
        # A name that is not ASCII is sent in RFC 5987 form, the extension added inside it.
        (
            "страница.html",
            b"text\n<script>alert(1)</script>\n",
            "attachment; filename*=utf-8''%D1%81%D1%82%D1%80%D0%B0%D0%BD%D0%B8%D1%86%D0%B0.html.txt",
        ),
        ('say "hi".htm', b"hi\n<script>alert(1)</script>\n", 'attachment; filename="say \\"hi\\".htm.txt"'),
    ],
)
def test_it_downloads_a_file_under_a_name_ending_in_its_types_extension(
    owner_client, conversation, name, content, disposition
):
    body = upload(owner_client, conversation.id, name, content).json()
    assert body["name"] == name

    served = owner_client.get(f"/api/attachments/{body['id']}/")

    assert served.status_code == 200
    assert served["Content-Disposition"] == disposition
    assert served["X-Content-Type-Options"] == "nosniff"


def test_a_name_of_255_characters_stays_within_255_when_txt_is_added(owner_client, conversation):
    name = "n" * 250 + ".html"
    body = raw_upload(owner_client, conversation.id, name, b"hello\n<script>alert(1)</script>\n").json()
    assert body["name"] == name

    served = owner_client.get(f"/api/attachments/{body['id']}/")

    assert served["Content-Disposition"] == f'attachment; filename="{"n" * 250}..txt"'


def test_it_serves_nothing_without_the_owners_session(owner_client, anonymous_client, conversation):
    body = upload(owner_client, conversation.id, "a.txt", b"secret\n").json()

    response = anonymous_client.get(f"/api/attachments/{body['id']}/")

    assert response.status_code in (401, 403)
    assert b"secret" not in response.content
    assert_error(upload(anonymous_client, conversation.id, "b.txt", b"x\n"), response.status_code, "not_authenticated")


def test_it_answers_404_for_an_unknown_attachment(owner_client):
    assert_error(owner_client.get(f"/api/attachments/{uuid.uuid4()}/"), 404, "not_found")
    assert_error(owner_client.get("/api/attachments/nope/"), 400, "invalid_id")


def test_it_stores_the_same_content_once(owner_client, conversation):
    first = upload(owner_client, conversation.id, "a.txt", b"same\n").json()
    second = upload(owner_client, conversation.id, "b.txt", b"same\n").json()

    assert first["id"] != second["id"]
    assert first["sha256"] == second["sha256"]
    assert [p.name for p in blob_path(first["sha256"]).parent.iterdir()] == [first["sha256"]]


def test_it_takes_a_file_of_exactly_20_mb(owner_client, conversation):
    content = b"a" * (FILE_MAX - 1) + b"\n"
    response = upload(owner_client, conversation.id, "big.txt", content)

    assert response.status_code == 201, response.content
    assert response.json()["size"] == FILE_MAX


def test_it_refuses_a_file_one_byte_over_20_mb(owner_client, conversation):
    response = upload(owner_client, conversation.id, "big.txt", b"a" * FILE_MAX + b"\n")

    assert_error(response, 413, "too_large")
    assert_nothing_stored()


def test_it_refuses_a_body_declared_far_over_the_limit_before_reading_it(owner_client, conversation):
    response = owner_client.generic(
        "POST",
        f"/api/conversations/{conversation.id}/attachments/",
        b"--x\r\n",
        content_type="multipart/form-data; boundary=x",
        headers={"Content-Length": str(FILE_MAX * 2)},
    )

    assert_error(response, 413, "too_large")
    assert_nothing_stored()


@pytest.mark.parametrize(
    ("name", "content", "media_type"),
    [
        ("photo.pdf", png(), "image/png"),  # the content decides, not the name
        ("scan.png", b"%PDF-1.4\n%\xe2\xe3\n", "application/pdf"),
        ("a.jpg", b"\xff\xd8\xff\xe0" + b"\x00" * 32, "image/jpeg"),
        ("a.gif", b"GIF89a" + b"\x00" * 32, "image/gif"),
        ("a.webp", b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 32, "image/webp"),
        ("data.csv", b"a,b\n1,2\n", "text/csv"),
        ("data.json", b'{"a": [1, 2]}', "application/json"),
        ("main.py", "print('héllo')\n".encode(), "text/plain"),
        ("README", b"plain words\n", "text/plain"),
        # A GIF whose bytes also hold a page: served as a GIF, never as a page.
        ("poly.html", b"GIF89a/*<html><script>alert(1)</script>*/", "image/gif"),
    ],
)
def test_it_decides_the_type_from_the_content(owner_client, conversation, name, content, media_type):
    response = upload(owner_client, conversation.id, name, content)

    assert response.status_code == 201, response.content
    assert response.json()["media_type"] == media_type
    assert Attachment.objects.get().media_type == media_type


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("page.png", b"<!DOCTYPE html><html><script>alert(1)</script></html>"),
        ("page.txt", b"\n  <html><body>hi</body></html>"),
        ("logo.png", b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'),
        ("feed.txt", b'<?xml version="1.0"?><rss/>'),
        ("prog.exe", b"MZ\x90\x00\x03\x00\x00\x00" + b"\x00" * 64),
        ("latin1.txt", "caf\xe9".encode("latin-1")),
        ("bad.json", b"{not json"),
        ("empty.txt", b""),
        ("late-nul.txt", b"a" * 70_000 + b"\x00"),
    ],
)
def test_it_refuses_other_types(owner_client, conversation, name, content):
    response = upload(owner_client, conversation.id, name, content)

    assert_error(response, 415, "unsupported_type")
    assert_nothing_stored()


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("../../x", "x"),
        ("..\\..\\windows\\x.txt", "x.txt"),
        ("a\x01b\x1b[31m\u202ec.txt", "ab[31mc.txt"),
        ("n" * 300 + ".txt", "n" * 251 + ".txt"),
        ("名" * 300 + ".txt", "名" * 251 + ".txt"),
    ],
)
def test_it_keeps_a_cleaned_name_and_never_uses_it_as_a_path(owner_client, conversation, given, kept):
    response = raw_upload(owner_client, conversation.id, given, b"hello\n")

    assert response.status_code == 201, response.content
    assert response.json()["name"] == kept
    assert Attachment.objects.get().name == kept
    assert blob_path(response.json()["sha256"]).read_bytes() == b"hello\n"


def raw_upload(client, conversation_id: object, name: str, content: bytes):
    """POST one file with its name as given: the test client's own upload would cut it to 255 characters."""
    boundary = "flarebot-boundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            "Content-Type: text/plain\r\n\r\n"
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return client.post(
        f"/api/conversations/{conversation_id}/attachments/",
        body,
        content_type=f"multipart/form-data; boundary={boundary}",
    )


@pytest.mark.parametrize("name", ["n" * 1_000 + ".txt", "名" * 330 + ".txt"])
def test_it_names_the_problem_of_a_name_too_long_to_read(owner_client, conversation, name):
    response = raw_upload(owner_client, conversation.id, name, b"hello\n")

    assert_error(response, 400, "name_too_long")
    assert "shorten it" in response.json()["error"]["message"]
    assert_nothing_stored()


def test_it_refuses_an_upload_without_one_file(owner_client, conversation):
    url = f"/api/conversations/{conversation.id}/attachments/"
    assert_error(owner_client.post(url, {"other": "x"}), 400, "invalid_upload")
    response = owner_client.post(url, json.dumps({"file": "x"}), content_type="application/json")
    assert response.status_code == 415
    assert_nothing_stored()


def test_it_refuses_an_upload_to_an_unknown_or_deleted_conversation(owner_client, conversation):
    assert_error(upload(owner_client, uuid.uuid4(), "a.txt", b"x\n"), 404, "conversation_not_found")
    conversations.conversation_delete(conversation_id=conversation.id)
    assert_error(upload(owner_client, conversation.id, "a.txt", b"x\n"), 404, "conversation_not_found")
    assert_nothing_stored()


def test_removing_a_file_that_was_not_sent_leaves_nothing_behind(
    owner_client, conversation, django_capture_on_commit_callbacks
):
    unsent = upload(owner_client, None, "a.png", png()).json()
    in_conversation = upload(owner_client, conversation.id, "b.txt", b"b\n").json()

    with django_capture_on_commit_callbacks(execute=True):
        assert owner_client.delete(f"/api/attachments/{unsent['id']}/").status_code == 204
        assert owner_client.delete(f"/api/attachments/{in_conversation['id']}/").status_code == 204

    assert_nothing_stored()
    assert not blob_path(unsent["sha256"]).exists()
    assert not blob_path(in_conversation["sha256"]).exists()
    assert_error(owner_client.delete(f"/api/attachments/{unsent['id']}/"), 404, "not_found")


def test_a_sent_file_is_not_removed_on_its_own(owner_client, conversation):
    sent = upload(owner_client, conversation.id, "a.txt", b"sent\n").json()
    turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="", attachments=[sent["id"]])

    assert_error(owner_client.delete(f"/api/attachments/{sent['id']}/"), 409, "attachment_sent")
    assert Attachment.objects.filter(id=sent["id"]).exists()
    assert blob_path(sent["sha256"]).read_bytes() == b"sent\n"


def test_it_uploads_a_pdf(owner_client, conversation):
    response = upload(owner_client, conversation.id, "doc.pdf", pdf(["one", "two"]))

    assert response.status_code == 201, response.content
    assert response.json()["media_type"] == "application/pdf"
