"""Scheduled tasks as they run unattended: real beat (django-celery-beat's database scheduler),
a real Celery worker and daphne, with no socket connected to any conversation.

The owner uses only the HTTP API; the model is the loopback provider. Every wait is a poll
with a deadline, and no assertion is about how fast something happened (bench/tasks.py
measures that).
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from celery import current_app
from django.utils import timezone
from django_celery_beat.models import ClockedSchedule, PeriodicTask

from conversations.models import Message, Turn
from tasks.models import Task
from tests.support.fake_providers import FakeProviders, Text
from tests.support.live import LiveStack
from tests.support.live_clients import OwnerClient

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("anthropic_key")]

RUN_SECONDS = 60.0  # from a due instant to the run's end, with margin for a loaded machine


def instant(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def create_task(owner: OwnerClient, conversation_id: str, schedule: dict[str, Any], **fields: Any) -> dict[str, Any]:
    body = {
        "id": str(uuid.uuid4()),
        "conversation_id": conversation_id,
        "name": "Morning check",
        "instructions": "Tell me something cheerful.",
        "schedule": schedule,
        "enabled": True,
        **fields,
    }
    response = owner.api("POST", "/api/tasks/", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


def history(owner: OwnerClient, task_id: str) -> list[dict[str, Any]]:
    response = owner.api("GET", f"/api/tasks/{task_id}/runs/?limit=100")
    assert response.status_code == 200, response.text
    return list(reversed(response.json()["runs"]))  # oldest first


def wait(live: LiveStack, condition: Any, *, timeout: float, what: str) -> None:
    live.stack.wait_for(condition, timeout=timeout, what=what)


def soon(seconds: float) -> datetime:
    return (timezone.now() + timedelta(seconds=seconds)).replace(microsecond=0) + timedelta(seconds=1)


def test_a_minutely_schedule_in_a_non_utc_zone_runs_twice_with_nobody_connected(
    live_stack: LiveStack, live_owner: OwnerClient, fake_providers: FakeProviders
) -> None:
    conversation_id = live_owner.create_conversation("Every minute")
    # +05:45: a zone whose offset is not whole hours, so a wrong conversion would show.
    schedule = {"kind": "cron", "expression": "* * * * *", "timezone": "Asia/Kathmandu"}
    task = create_task(live_owner, conversation_id, schedule)
    first = parse(task["next_run_at"])
    assert first.second == 0
    assert [parse(at) - first for at in task["upcoming"]] == [timedelta(minutes=n) for n in range(5)]

    def two_completed() -> bool:
        return [r["status"] for r in history(live_owner, task["id"])][:2] == ["completed", "completed"]

    wait(live_stack, two_completed, timeout=150, what="two runs of the minutely task")
    done = history(live_owner, task["id"])[:2]
    assert [parse(r["intended_at"]) for r in done] == [first, first + timedelta(minutes=1)]
    assert {r["source"] for r in done} == {"scheduled"}
    transcript = live_owner.messages(conversation_id)
    users = [m for m in transcript["messages"] if m["role"] == "user"]
    assert [m["turn_id"] for m in users[:2]] == [r["turn_id"] for r in done]
    for message, run in zip(users, done, strict=False):
        assert message["parts"][0]["text"] == "Tell me something cheerful."
        assert message["parts"][0]["source"] == {
            "kind": "task",
            "task_id": task["id"],
            "run_id": run["id"],
            "name": "Morning check",
        }
    answers = [m for m in transcript["messages"] if m["role"] == "assistant"]
    assert "Hello from the fake model." in [m["parts"][0]["text"] for m in answers]
    events = live_owner.api("GET", f"/api/conversations/{conversation_id}/events/?after=0").json()["events"]
    updates = [
        e["data"]["run"] for e in events if e["event"] == "task_run.updated" and e["data"]["run"]["id"] == done[0]["id"]
    ]
    assert updates[0]["status"] == "pending"
    assert updates[-1]["status"] == "completed"
    # The next occurrence is armed in beat.
    now = live_owner.api("GET", f"/api/tasks/{task['id']}/").json()
    assert parse(now["next_run_at"]) > parse(done[1]["intended_at"])


def test_a_one_off_due_while_beat_was_down_runs_once_when_it_is_back(
    live_stack: LiveStack, live_owner: OwnerClient, fake_providers: FakeProviders
) -> None:
    conversation_id = live_owner.create_conversation("Reminder")
    at = soon(6)
    task = create_task(live_owner, conversation_id, {"kind": "once", "at": instant(at)})
    assert task["next_run_at"] == instant(at)
    live_stack.stack.stop(only="beat")
    try:
        while timezone.now() < at + timedelta(seconds=3):
            time.sleep(0.5)
        assert history(live_owner, task["id"]) == []  # nothing ran while beat was down
    finally:
        since = live_stack.log_size("beat")
        live_stack.stack.start(only="beat")
        live_stack.wait_ready("beat", since=since)

    def completed() -> bool:
        runs = history(live_owner, task["id"])
        return bool(runs) and runs[-1]["status"] == "completed"

    wait(live_stack, completed, timeout=RUN_SECONDS, what="the overdue one-off to run")
    [run] = history(live_owner, task["id"])
    assert (run["source"], run["intended_at"]) == ("scheduled", instant(at))
    after = live_owner.api("GET", f"/api/tasks/{task['id']}/").json()
    assert (after["next_run_at"], after["upcoming"]) == (None, [])
    assert Turn.objects.filter(conversation_id=conversation_id).count() == 1


@pytest.mark.database
def test_a_one_off_fires_on_time_across_a_beat_restart_and_a_duplicate_fire_runs_nothing_more(
    live_stack: LiveStack, live_owner: OwnerClient, fake_providers: FakeProviders
) -> None:
    conversation_id = live_owner.create_conversation("Duplicates")
    at = soon(10)
    task = create_task(live_owner, conversation_id, {"kind": "once", "at": instant(at)})
    live_stack.restart("beat")  # before the due time: it reads the schedule back from the database
    kwargs = {"task_id": task["id"]}  # what beat's row sends
    for _ in range(2):  # early, as a second beat or a redelivery might: nothing is due yet
        current_app.send_task("tasks.jobs.task_fire", kwargs=kwargs)

    def completed() -> bool:
        runs = history(live_owner, task["id"])
        return bool(runs) and runs[-1]["status"] == "completed"

    wait(live_stack, completed, timeout=RUN_SECONDS, what="the one-off to run")
    for _ in range(2):
        current_app.send_task("tasks.jobs.task_fire", kwargs=kwargs)
    time.sleep(3)  # give the late duplicates their chance to do harm
    [run] = history(live_owner, task["id"])
    assert run["intended_at"] == instant(at)
    assert Turn.objects.filter(conversation_id=conversation_id).count() == 1
    assert Message.objects.filter(conversation_id=conversation_id, role="user").count() == 1


def test_occurrences_missed_while_beat_was_down_are_recorded_as_one_missed_run(
    live_stack: LiveStack, live_owner: OwnerClient, fake_providers: FakeProviders
) -> None:
    conversation_id = live_owner.create_conversation("Outage")
    live_stack.stack.stop(only="beat")
    try:
        task = create_task(
            live_owner, conversation_id, {"kind": "cron", "expression": "* * * * *", "timezone": "Europe/Berlin"}
        )
        # Stand in for an outage of 20 minutes: beat still holds the occurrence it had then.
        stale = parse(task["next_run_at"]) - timedelta(minutes=20)
        held = PeriodicTask.objects.get(name=f"flarebot task {task['id']}")
        ClockedSchedule.objects.filter(id=held.clocked_id).update(clocked_time=stale)
        Task.objects.filter(id=task["id"]).update(armed_at=stale)
    finally:
        since = live_stack.log_size("beat")
        live_stack.stack.start(only="beat")
        live_stack.wait_ready("beat", since=since)

    def recorded() -> bool:
        return any(r["status"] == "missed" for r in history(live_owner, task["id"]))

    wait(live_stack, recorded, timeout=RUN_SECONDS, what="the missed run")
    runs = history(live_owner, task["id"])
    missed = [r for r in runs if r["status"] == "missed"]
    assert len(missed) == 1
    assert missed[0]["intended_at"] == instant(stale)
    assert missed[0]["turn_id"] is None
    # What ran is the latest occurrence only (within the grace); the rest are counted.
    ran = next(r for r in runs if r["status"] != "missed")
    gap = (parse(ran["intended_at"]) - stale) // timedelta(minutes=1)
    assert missed[0]["missed_count"] == gap >= 19
    assert parse(live_owner.api("GET", f"/api/tasks/{task['id']}/").json()["next_run_at"]) > parse(ran["intended_at"])
    live_owner.api("DELETE", f"/api/tasks/{task['id']}/?expected_version=1")


@pytest.mark.database
def test_run_now_runs_once_per_request_and_a_replay_returns_the_same_run(
    live_stack: LiveStack, live_owner: OwnerClient, fake_providers: FakeProviders
) -> None:
    conversation_id = live_owner.create_conversation("Now")
    task = create_task(live_owner, conversation_id, {"kind": "once", "at": instant(soon(3600))}, enabled=False)
    request_id = str(uuid.uuid4())
    first = live_owner.api("POST", f"/api/tasks/{task['id']}/runs/", json={"request_id": request_id})
    assert first.status_code == 202, first.text
    run = first.json()

    def completed() -> bool:
        return live_owner.api("GET", f"/api/tasks/{task['id']}/runs/").json()["runs"][0]["status"] == "completed"

    wait(live_stack, completed, timeout=RUN_SECONDS, what="the manual run")
    replay = live_owner.api("POST", f"/api/tasks/{task['id']}/runs/", json={"request_id": request_id}).json()
    assert (replay["id"], replay["turn_id"], replay["status"]) == (run["id"], run["turn_id"], "completed")
    assert Turn.objects.filter(conversation_id=conversation_id).count() == 1
    assert live_owner.api("GET", f"/api/tasks/{task['id']}/").json()["next_run_at"] is None


def _slow_answer() -> list[Any]:
    return [Text(f"Step {n}. ", delay=0.2) for n in range(100)]


def test_editing_a_task_cancels_its_running_turn_but_not_the_owners(
    live_stack: LiveStack, live_owner: OwnerClient, fake_providers: FakeProviders
) -> None:
    conversation_id = live_owner.create_conversation("Edit")
    fake_providers.script(_slow_answer())
    task = create_task(live_owner, conversation_id, {"kind": "once", "at": instant(soon(3600))})
    run = live_owner.api("POST", f"/api/tasks/{task['id']}/runs/", json={"request_id": str(uuid.uuid4())}).json()
    wait(
        live_stack,
        lambda: Turn.objects.filter(id=run["turn_id"], status="running").exists(),
        timeout=RUN_SECONDS,
        what="the task's turn to start",
    )
    owners = live_owner.api(
        "POST", f"/api/conversations/{conversation_id}/messages/", json={"request_id": str(uuid.uuid4()), "text": "Hi"}
    ).json()["turn_id"]
    body = {
        "expected_version": 1,
        "name": "Edited",
        "instructions": task["instructions"],
        "schedule": task["schedule"],
        "enabled": True,
    }
    assert live_owner.api("PUT", f"/api/tasks/{task['id']}/", json=body).status_code == 200

    def settled() -> bool:
        statuses = dict(Turn.objects.filter(id__in=[run["turn_id"], owners]).values_list("id", "status"))
        return statuses.get(uuid.UUID(owners)) == "completed"

    wait(live_stack, settled, timeout=RUN_SECONDS, what="the owner's turn to complete")
    assert Turn.objects.get(id=run["turn_id"]).status == "cancelled"
    [after] = live_owner.api("GET", f"/api/tasks/{task['id']}/runs/").json()["runs"]
    assert after["status"] == "cancelled"


def test_deleting_a_task_cancels_its_turn_and_leaves_other_conversations_running(
    live_stack: LiveStack, live_owner: OwnerClient, fake_providers: FakeProviders
) -> None:
    doomed_conversation = live_owner.create_conversation("Doomed task")
    other_conversation = live_owner.create_conversation("Other work")
    fake_providers.script(_slow_answer(), [Text(f"Other {n}. ", delay=0.2) for n in range(25)])
    task = create_task(live_owner, doomed_conversation, {"kind": "once", "at": instant(soon(3600))})
    run = live_owner.api("POST", f"/api/tasks/{task['id']}/runs/", json={"request_id": str(uuid.uuid4())}).json()
    wait(
        live_stack,
        lambda: Turn.objects.filter(id=run["turn_id"], status="running").exists(),
        timeout=RUN_SECONDS,
        what="the task's turn to start",
    )
    other = live_owner.api(
        "POST",
        f"/api/conversations/{other_conversation}/messages/",
        json={"request_id": str(uuid.uuid4()), "text": "Go"},
    ).json()["turn_id"]
    wait(
        live_stack, lambda: Turn.objects.filter(id=other, status="running").exists(), timeout=RUN_SECONDS, what="other"
    )
    assert live_owner.api("DELETE", f"/api/tasks/{task['id']}/?expected_version=1").status_code == 204
    wait(
        live_stack,
        lambda: Turn.objects.filter(id=run["turn_id"], status="cancelled").exists(),
        timeout=RUN_SECONDS,
        what="the task's turn to stop",
    )
    wait(
        live_stack,
        lambda: Turn.objects.filter(id=other, status="completed").exists(),
        timeout=RUN_SECONDS,
        what="other",
    )
    # The conversation and its transcript stay.
    assert [m["parts"][0]["text"] for m in live_owner.messages(doomed_conversation)["messages"]][:1] == [
        "Tell me something cheerful."
    ]
