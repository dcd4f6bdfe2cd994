# mypy: disable-error-code="union-attr,arg-type,index,operator,misc"
"""Running tasks without the live stack: fires, dispatch, projection from the turn, cancellation, repair.

Beat and the worker are stood in for by calling the jobs' services directly, with the
instants they would carry; the live tests (tests/test_live_tasks.py) run the real ones.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from conversations.models import Event, Message, Turn, TurnStatus
from conversations.services import conversation_create
from conversations.turns import turn_claim, turn_finish, turn_submit
from tasks import runs, services
from tasks.models import RunStatus, Task, TaskRun, TaskState
from tasks.selectors import task_view

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]


def make(conversation, *, schedule: dict, enabled: bool = True, name: str = "Check the news") -> Task:
    data = services.task_input_clean(name=name, instructions="What happened today?", schedule=schedule, enabled=enabled)
    task, _ = services.task_create(task_id=uuid.uuid4(), conversation_id=conversation.id, data=data)
    return task


def minutely(conversation, zone: str = "Europe/Berlin") -> Task:
    return make(conversation, schedule={"kind": "cron", "expression": "* * * * *", "timezone": zone})


def set_armed(task: Task, at: datetime) -> Task:
    """Stand in for time having passed: the task is armed at `at`, as beat would hold it."""
    Task.objects.filter(id=task.id).update(armed_at=at)
    task.refresh_from_db()
    return task


def history(task: Task) -> list[tuple]:
    return list(
        TaskRun.objects.filter(task=task)
        .order_by("intended_at", "status")
        .values_list("source", "status", "intended_at", "missed_count")
    )


def end_turn(turn_id: uuid.UUID, status: str) -> None:
    with transaction.atomic():
        claim = turn_claim(turn_id=turn_id)
    assert claim is not None
    assert turn_finish(turn_id=turn_id, lease_token=claim.lease_token, status=status)


def run_events(conversation) -> list[dict]:
    return [
        e.data["run"]
        for e in Event.objects.filter(conversation=conversation, kind="task_run.updated").order_by("sequence")
    ]


def fired_id(fired: runs.Fired | None) -> uuid.UUID | None:
    return fired.run_id if fired is not None else None


def minute(offset: int) -> datetime:
    return timezone.now().replace(second=0, microsecond=0) + timedelta(minutes=offset)


@pytest.fixture
def conversation(db: None):
    return conversation_create(name="News")


# ---- fires ---------------------------------------------------------------------------


def test_a_fire_runs_its_occurrence_and_arms_the_next(conversation) -> None:
    task = set_armed(minutely(conversation), minute(0))
    run_id = fired_id(runs.task_fire(task_id=task.id, intended_at=minute(0)))
    assert run_id is not None
    run = runs.run_dispatch(run_id=run_id)
    assert run is not None
    assert run.turn_id is not None
    assert history(task) == [("scheduled", "pending", minute(0), 1)]
    task.refresh_from_db()
    assert task.armed_at == minute(1)
    held = PeriodicTask.objects.get(name=f"flarebot task {task.id}")
    assert held.clocked.clocked_time == minute(1)
    turn = Turn.objects.get(id=run.turn_id)
    assert turn.request_id == runs.run_request_id(f"s:{task.id}:1:{minute(0):%Y-%m-%dT%H:%M:%SZ}")
    [message] = Message.objects.filter(turn=turn)
    assert message.parts[0]["source"] == {
        "kind": "task",
        "task_id": str(task.id),
        "run_id": str(run.id),
        "name": "Check the news",
    }
    assert [(r["status"], r["turn_id"]) for r in run_events(conversation)] == [
        ("pending", None),
        ("pending", str(turn.id)),
    ]


def test_a_duplicate_early_or_stale_fire_changes_nothing(conversation) -> None:
    # Hourly, half an hour from now: the next occurrence is far from any fire of this test.
    expression = f"{(timezone.now().minute + 30) % 60} * * * *"
    task = set_armed(make(conversation, schedule={"kind": "cron", "expression": expression}), minute(0))
    assert runs.task_fire(task_id=task.id) is not None  # beat's fire: the armed occurrence is due
    before = history(task)
    # The same fire again (a second beat, beat reloading its schedule, a redelivery): the
    # task is armed half an hour on by now.
    assert runs.task_fire(task_id=task.id) is None
    assert runs.task_fire(task_id=task.id, intended_at=minute(0)) is None
    assert runs.task_fire(task_id=uuid.uuid4()) is None
    assert history(task) == before
    # An edit re-arms it: a fire of the old schedule finds nothing due.
    services.task_update(
        task_id=task.id,
        expected_version=1,
        name="Renamed",
        instructions="x",
        schedule={"kind": "cron", "expression": "0 0 1 1 *"},
        enabled=True,
    )
    assert runs.task_fire(task_id=task.id) is None
    assert [row[1] for row in history(task)] == ["cancelled"]  # the edit cancelled the run not yet dispatched
    assert Turn.objects.count() == 0


def test_a_dispatch_retried_finds_the_same_turn(conversation) -> None:
    task = set_armed(minutely(conversation), minute(0))
    run_id = fired_id(runs.task_fire(task_id=task.id, intended_at=minute(0)))
    assert run_id is not None
    first = runs.run_dispatch(run_id=run_id)
    # A retry after a lost reply: the run has its turn; and even were it cleared, the
    # request id would find the same turn.
    assert runs.run_dispatch(run_id=run_id).turn_id == first.turn_id
    TaskRun.objects.filter(id=run_id).update(turn_id=None)
    assert runs.run_dispatch(run_id=run_id).turn_id == first.turn_id
    assert Turn.objects.count() == 1


def test_a_fire_late_beyond_the_grace_records_one_missed_run_with_its_count(conversation) -> None:
    task = set_armed(minutely(conversation), minute(-30))
    assert runs.task_fire(task_id=task.id, intended_at=minute(-30)) is not None
    rows = history(task)
    # 30 minutes late: the latest occurrence (this minute) is within the grace and runs;
    # the 30 before it are one missed run.
    assert rows == [("scheduled", "missed", minute(-30), 30), ("scheduled", "pending", minute(0), 1)]
    task.refresh_from_db()
    assert task.armed_at == minute(1)


def test_a_long_outage_is_one_missed_run_and_nothing_runs_late(conversation) -> None:
    # Hourly, at the minute half an hour from now: its latest occurrence is 30 minutes past.
    now = timezone.now()
    at_minute = (now.minute + 30) % 60
    task = make(conversation, schedule={"kind": "cron", "expression": f"{at_minute} * * * *", "timezone": "UTC"})
    upcoming_at = Task.objects.get(id=task.id).armed_at
    first = upcoming_at - timedelta(hours=49)
    task = set_armed(task, first)
    assert runs.task_fire(task_id=task.id, intended_at=first) is None
    assert history(task) == [("scheduled", "missed", first, 49)]
    task.refresh_from_db()
    assert task.armed_at == upcoming_at


def test_an_overdue_one_off_runs_once_and_is_consumed(conversation) -> None:
    at = (timezone.now() + timedelta(hours=1)).replace(microsecond=0)
    task = make(conversation, schedule={"kind": "once", "at": at.strftime("%Y-%m-%dT%H:%M:%SZ")})
    late = at - timedelta(hours=3)  # stand in for a scheduler that was down for hours
    Task.objects.filter(id=task.id).update(once_at=late, armed_at=late)
    run_id = fired_id(runs.task_fire(task_id=task.id, intended_at=late))
    assert run_id is not None
    task.refresh_from_db()
    assert (task.consumed, task.armed_at) == (True, None)
    assert PeriodicTask.objects.get(id=task.periodic_task_id).enabled is False
    assert history(task) == [("scheduled", "pending", late, 1)]
    assert runs.task_fire(task_id=task.id, intended_at=late) is None
    view = task_view(task)
    assert (view["next_run_at"], view["upcoming"]) == (None, [])


def test_a_disabled_task_or_a_deleted_conversation_fires_nothing(conversation) -> None:
    task = set_armed(minutely(conversation), minute(0))
    Task.objects.filter(id=task.id).update(enabled=False)
    assert runs.task_fire(task_id=task.id, intended_at=minute(0)) is None
    Task.objects.filter(id=task.id).update(enabled=True)
    conversation.state = "deleting"
    conversation.save()
    assert runs.task_fire(task_id=task.id, intended_at=minute(0)) is None
    assert history(task) == []


# ---- dispatch rechecks ---------------------------------------------------------------


def test_a_run_whose_task_changed_before_dispatch_is_discarded(conversation) -> None:
    task = set_armed(minutely(conversation), minute(0))
    run_id = fired_id(runs.task_fire(task_id=task.id, intended_at=minute(0)))
    services.task_update(
        task_id=task.id,
        expected_version=1,
        name="Renamed",
        instructions="x",
        schedule={"kind": "cron", "expression": "* * * * *"},
        enabled=True,
    )
    run = runs.run_dispatch(run_id=run_id)
    assert (run.status, run.turn_id) == (RunStatus.CANCELLED, None)
    assert Turn.objects.count() == 0


def test_a_manual_run_of_a_disabled_task_runs_but_an_edit_after_it_invalidates_it(conversation) -> None:
    task = minutely(conversation)
    services.task_update(
        task_id=task.id,
        expected_version=1,
        name="Off",
        instructions="x",
        schedule={"kind": "cron", "expression": "* * * * *"},
        enabled=False,
    )
    run = runs.task_run_now(task_id=task.id, request_id=uuid.uuid4())
    assert run.turn_id is not None
    late = runs.run_now(task_id=task.id, request_id=uuid.uuid4())
    services.task_update(
        task_id=task.id,
        expected_version=2,
        name="Off",
        instructions="x",
        schedule={"kind": "cron", "expression": "* * * * *"},
        enabled=False,
    )
    assert runs.run_dispatch(run_id=late.id).status == RunStatus.CANCELLED


# ---- projection ----------------------------------------------------------------------


def test_a_run_follows_its_turn_forward_only(conversation) -> None:
    task = minutely(conversation)
    run = runs.task_run_now(task_id=task.id, request_id=uuid.uuid4())
    end_turn(run.turn_id, TurnStatus.COMPLETED)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert [r["status"] for r in run_events(conversation)] == ["pending", "pending", "completed"]
    # A late report of an earlier state changes nothing.
    runs.runs_project_turn(turn_id=run.turn_id, status="queued")
    assert runs._project(run.id, RunStatus.RUNNING) is False
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED


def test_reads_show_the_turns_status_before_the_run_row_has_it(conversation) -> None:
    task = minutely(conversation)
    run = runs.task_run_now(task_id=task.id, request_id=uuid.uuid4())
    with transaction.atomic():
        turn_claim(turn_id=run.turn_id)
    assert task_view(Task.objects.get(id=task.id))["previous_run"]["status"] == "running"
    assert runs.tasks_reconcile()["projected"] == 1
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING


# ---- cancellation --------------------------------------------------------------------


def test_editing_cancels_the_tasks_own_turns_only(conversation) -> None:
    task = minutely(conversation)
    other = minutely(conversation)
    mine = runs.task_run_now(task_id=task.id, request_id=uuid.uuid4())
    theirs = runs.task_run_now(task_id=other.id, request_id=uuid.uuid4())
    owners, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="Unrelated question")
    services.task_update(
        task_id=task.id,
        expected_version=1,
        name="New",
        instructions="x",
        schedule={"kind": "cron", "expression": "* * * * *"},
        enabled=True,
    )
    statuses = dict(Turn.objects.values_list("id", "status"))
    assert statuses == {mine.turn_id: "cancelled", theirs.turn_id: "queued", owners.id: "queued"}
    assert TaskRun.objects.get(id=mine.id).status == RunStatus.CANCELLED
    assert TaskRun.objects.get(id=theirs.id).status == RunStatus.PENDING


def test_deleting_cancels_its_turns_and_erases_its_history(conversation) -> None:
    task = minutely(conversation)
    run = runs.task_run_now(task_id=task.id, request_id=uuid.uuid4())
    owners, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="Unrelated question")
    assert services.task_delete(task_id=task.id, expected_version=1)
    assert dict(Turn.objects.values_list("id", "status")) == {run.turn_id: "cancelled", owners.id: "queued"}
    assert TaskRun.objects.count() == 0
    assert Task.objects.get(id=task.id).state == TaskState.DELETED


# ---- reconciliation -------------------------------------------------------------------


def test_reconciliation_recreates_a_missing_schedule_from_the_task(conversation) -> None:
    task = minutely(conversation)
    armed = Task.objects.get(id=task.id).armed_at
    PeriodicTask.objects.filter(name=f"flarebot task {task.id}").delete()
    view = task_view(Task.objects.select_related("periodic_task__clocked").get(id=task.id))
    assert view["next_run_at"] is None
    assert runs.tasks_reconcile()["rearmed"] == 1
    held = PeriodicTask.objects.get(name=f"flarebot task {task.id}")
    assert held.clocked.clocked_time == armed


def test_a_schedule_that_could_not_be_armed_says_so(conversation, monkeypatch: pytest.MonkeyPatch) -> None:
    from django.db import DatabaseError
    from django_celery_beat import models as beat

    def refuse(*args, **kwargs):
        raise DatabaseError("the schedule table is unavailable")

    monkeypatch.setattr(beat.ClockedSchedule.objects, "create", refuse)
    task = minutely(conversation)
    view = task_view(Task.objects.select_related("periodic_task__clocked").get(id=task.id))
    assert (view["next_run_at"], view["scheduling_error"]) == (None, "schedule_unavailable")
    monkeypatch.undo()
    runs.tasks_reconcile()
    view = task_view(Task.objects.select_related("periodic_task__clocked").get(id=task.id))
    assert view["scheduling_error"] is None
    assert view["next_run_at"] is not None


def test_reconciliation_takes_a_fire_that_never_came(conversation) -> None:
    task = set_armed(minutely(conversation), minute(-2))
    done = runs.tasks_reconcile()
    assert done["fired"] == 1
    rows = history(task)
    assert rows[-1][:2] == ("scheduled", "pending")
    assert TaskRun.objects.get(task=task, status="pending").turn_id is not None


def test_a_dispatch_that_never_got_through_gets_one_more_try_then_is_sealed(conversation, monkeypatch) -> None:
    task = set_armed(minutely(conversation), minute(0))
    run_id = fired_id(runs.task_fire(task_id=task.id, intended_at=minute(0)))
    TaskRun.objects.filter(id=run_id).update(created_at=timezone.now() - timedelta(minutes=1))

    def broken(**kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(runs, "turn_submit_unpublished", broken)
    runs.tasks_reconcile()
    run = TaskRun.objects.get(id=run_id)
    assert (run.status, run.error_code, run.recovery_used) == (RunStatus.FAILED, "dispatch_failed", True)
    monkeypatch.undo()
    assert runs.run_dispatch(run_id=run_id).status == RunStatus.FAILED  # never dispatched again
    assert Turn.objects.count() == 0


def test_a_deleted_tasks_beat_rows_are_removed_only_once_beat_cannot_be_reading_them(conversation) -> None:
    from django_celery_beat.models import ClockedSchedule

    task = minutely(conversation)
    held = PeriodicTask.objects.get(name=f"flarebot task {task.id}")
    services.task_delete(task_id=task.id, expected_version=1)
    runs.tasks_reconcile()
    assert PeriodicTask.objects.get(id=held.id).enabled is False
    assert ClockedSchedule.objects.filter(id=held.clocked_id).exists()
    PeriodicTask.objects.filter(id=held.id).update(date_changed=timezone.now() - timedelta(minutes=3))
    assert runs.tasks_reconcile()["retired"] == 1
    assert not PeriodicTask.objects.filter(id=held.id).exists()
    assert not ClockedSchedule.objects.filter(id=held.clocked_id).exists()


def test_reconciliation_disables_a_row_that_beat_enabled_again(conversation) -> None:
    task = minutely(conversation)
    services.task_update(
        task_id=task.id,
        expected_version=1,
        name="Off",
        instructions="x",
        schedule={"kind": "cron", "expression": "* * * * *"},
        enabled=False,
    )
    # Beat saved the whole row it had read before the disarm.
    PeriodicTask.objects.filter(name=f"flarebot task {task.id}").update(enabled=True)
    runs.tasks_reconcile()
    assert PeriodicTask.objects.get(name=f"flarebot task {task.id}").enabled is False
