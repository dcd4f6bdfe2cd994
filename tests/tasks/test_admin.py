"""Tasks in the admin: listed for the owner, tombstones without content, nothing changeable; beat's rows shown."""

from __future__ import annotations

import uuid

import pytest

from tasks import services
from tasks.models import Task

pytestmark = pytest.mark.django_db(transaction=True)


def make(conversation, name: str) -> Task:
    data = services.task_input_clean(
        name=name, instructions="Do it.", schedule={"kind": "cron", "expression": "0 9 * * 1"}, enabled=True
    )
    task, _ = services.task_create(task_id=uuid.uuid4(), conversation_id=conversation.id, data=data)
    return task


def test_it_lists_tasks_and_beats_schedule_without_letting_the_owner_change_them(owner_client, conversation):
    make(conversation, "Weekly summary")
    gone = make(conversation, "Secret plan")
    services.task_delete(task_id=gone.id, expected_version=1)

    listed = owner_client.get("/admin/tasks/task/")
    beat = owner_client.get("/admin/django_celery_beat/periodictask/")
    changed = owner_client.post(f"/admin/tasks/task/{gone.id}/change/", {"name": "Back"})

    assert listed.status_code == 200
    assert b"Weekly summary" in listed.content
    assert b"(deleted: a tombstone without content)" in listed.content
    assert b"Secret plan" not in listed.content
    assert beat.status_code == 200
    assert b"flarebot task" in beat.content
    assert changed.status_code == 403
    assert Task.objects.get(id=gone.id).name == ""
