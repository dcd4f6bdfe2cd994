"""An attachment's life after upload: clearing and deleting its conversation, and the sweep."""

from __future__ import annotations

import os
import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from attachments import services
from attachments.limits import UNSENT_MAX_AGE
from attachments.models import Attachment
from attachments.storage import blob_path, tmp_dir
from conversations import services as conversations
from conversations.clearing import conversation_clear
from conversations.turns import turn_submit
from tests.attachments.support import png, upload

pytestmark = [pytest.mark.django_db, pytest.mark.database]


def age(path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_it_deletes_a_deleted_conversations_attachments_and_their_blobs(
    owner_client, django_capture_on_commit_callbacks
):
    gone = conversations.conversation_create(name="Gone")
    kept = conversations.conversation_create(name="Kept")
    only_here = upload(owner_client, gone.id, "a.png", png(3, 3)).json()
    shared = upload(owner_client, gone.id, "b.txt", b"shared\n").json()
    elsewhere = upload(owner_client, kept.id, "c.txt", b"shared\n").json()
    conversations.conversation_delete(conversation_id=gone.id)

    with django_capture_on_commit_callbacks(execute=True):
        assert conversations.conversation_teardown(conversation_id=gone.id) is True

    assert [str(i) for i in Attachment.objects.values_list("id", flat=True)] == [elsewhere["id"]]
    assert not blob_path(only_here["sha256"]).exists()
    assert blob_path(shared["sha256"]).read_bytes() == b"shared\n"  # another conversation's file
    assert owner_client.get(f"/api/attachments/{only_here['id']}/").status_code == 404


def test_it_deletes_a_cleared_conversations_attachments(owner_client, django_capture_on_commit_callbacks):
    conversation = conversations.conversation_create(name="Files")
    body = upload(owner_client, conversation.id, "a.png", png()).json()

    with django_capture_on_commit_callbacks(execute=True):
        conversation_clear(conversation_id=conversation.id)

    assert Attachment.objects.count() == 0
    assert not blob_path(body["sha256"]).exists()
    assert owner_client.get(f"/api/attachments/{body['id']}/").status_code == 404


def test_the_sweep_removes_interrupted_uploads_and_unnamed_blobs_after_an_hour(owner_client):
    conversation = conversations.conversation_create(name="Files")
    named = upload(owner_client, conversation.id, "a.txt", b"named\n").json()
    old_tmp, new_tmp = tmp_dir() / "upload-old", tmp_dir() / "upload-new"
    old_tmp.write_bytes(b"half a file")
    new_tmp.write_bytes(b"still arriving")
    age(old_tmp, 3601)
    orphan = blob_path("0" * 64)
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b"nobody")
    age(orphan, 3601)
    age(blob_path(named["sha256"]), 3601)

    assert services.attachments_sweep() == 2

    assert not old_tmp.exists()
    assert new_tmp.exists()
    assert not orphan.exists()
    assert blob_path(named["sha256"]).exists()
    new_tmp.unlink()


def test_the_sweep_removes_a_file_of_no_conversation_a_day_after_it_was_left_unsent(owner_client):
    left = upload(owner_client, None, "left.txt", b"left\n").json()
    recent = upload(owner_client, None, "recent.txt", b"recent\n").json()
    sent = upload(owner_client, None, "sent.txt", b"sent\n").json()
    conversation = conversations.conversation_create(name="Files")
    turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="", attachments=[sent["id"]])
    a_day_ago = timezone.now() - UNSENT_MAX_AGE - timedelta(seconds=1)
    Attachment.objects.filter(id__in=[left["id"], sent["id"]]).update(created_at=a_day_ago)
    for body in (left, recent, sent):
        age(blob_path(body["sha256"]), UNSENT_MAX_AGE.total_seconds() + 1)

    services.attachments_sweep()  # its count holds what earlier tests left on the disk too

    assert sorted(Attachment.objects.values_list("name", flat=True)) == ["recent.txt", "sent.txt"]
    assert not blob_path(left["sha256"]).exists()
    assert blob_path(recent["sha256"]).exists()
    assert blob_path(sent["sha256"]).exists()
