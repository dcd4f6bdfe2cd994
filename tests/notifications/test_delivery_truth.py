"""What a coalesced message says is still true when it goes: answered questions and taken proposals are dropped.

The loopback JSON receiver counts what arrives; time moves by the `now` each delivery is
given, never by waiting.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from conversations.browser_tasks.services import Reply, browser_task_cancel, browser_task_dismiss, critical_point_answer
from conversations.models import BrowserTask, Conversation, CriticalPoint, CriticalPointState
from conversations.services import conversation_create
from notifications import delivery
from notifications.models import Delivery, DeliveryStatus, Destination
from tasks.models import RunStatus
from tests.notifications.conftest import add, json_url, question_opens, run_ends
from tests.notifications.test_delivery import propose

pytestmark = [pytest.mark.django_db, pytest.mark.database]

ASKS = "A browser task waits for your approval"
# The deliveries' clock runs this far ahead of the one rows are written with: whatever a test
# records is due by the moment it names, however long the machine took to record it.
AHEAD = timedelta(minutes=10)


def deliver_at(destination: Destination, now: datetime) -> None:
    delivery.destination_deliver(destination_id=destination.id, now=now)


def sweep_at(now: datetime) -> None:
    """What beat's sweep does at `now`: every destination with something due gets it."""
    for destination_id in delivery.notifications_sweep(now=now):
        delivery.destination_deliver(destination_id=destination_id, now=now)


def asks(name: str) -> BrowserTask:
    """A browser task of a conversation of its own asks the owner to approve an action."""
    return question_opens(conversation_create(name=name))


def answer(task: BrowserTask, *, approve: bool) -> None:
    point = CriticalPoint.objects.get(task=task)
    critical_point_answer(
        conversation_id=task.conversation_id, reply=Reply(critical_point_id=str(point.id), approve=approve)
    )


def card(task: BrowserTask) -> str:
    return f"{settings.FLAREBOT_ORIGIN}/?c={task.conversation_id}#browser-task-{task.proposal_id}"


def still_open(tasks: list[BrowserTask]) -> int:
    return CriticalPoint.objects.filter(task__in=tasks, state=CriticalPointState.OPEN).count()


def test_a_question_answered_inside_the_minute_is_not_sent_and_the_count_is_what_waits(owner, json_receiver):
    destination = add(json_url(json_receiver))
    asks("Bills")
    start = timezone.now() + AHEAD
    deliver_at(destination, start)  # the first question goes at once: the minute starts
    approved, denied, stopped, waiting, also_waiting = (
        asks(name) for name in ("Rent", "Flights", "Groceries", "Insurance", "Taxes")
    )
    deliver_at(destination, start + timedelta(seconds=10))
    assert len(json_receiver.payloads()) == 1

    answer(approved, approve=True)
    answer(denied, approve=False)
    browser_task_cancel(conversation_id=stopped.conversation_id)
    sweep_at(start + delivery.COALESCE)
    sweep_at(start + delivery.COALESCE * 3)

    first, burst, stop = json_receiver.payloads()
    assert [first["title"], burst["title"], stop["title"]] == [
        ASKS,
        "2 browser tasks need your answer",  # the questions came before the task was stopped
        "A browser task was stopped",
    ]
    assert still_open([approved, denied, stopped, waiting, also_waiting]) == 2
    for resolved in (approved, denied):
        assert card(resolved) not in burst["message"] + stop["message"]
    assert burst["message"].endswith(card(also_waiting))
    assert stop["message"].endswith(card(stopped))
    dropped = Delivery.objects.filter(status=DeliveryStatus.DROPPED).select_related("notification")
    assert sorted(d.notification.key for d in dropped) == sorted(
        f"critical_point:{CriticalPoint.objects.get(task=task).id}" for task in (approved, denied, stopped)
    )


def test_questions_all_answered_inside_the_minute_send_nothing(owner, json_receiver):
    destination = add(json_url(json_receiver))
    asks("Bills")
    start = timezone.now() + AHEAD
    deliver_at(destination, start)
    first, second = asks("Rent"), asks("Flights")
    deliver_at(destination, start + timedelta(seconds=10))

    answer(first, approve=True)
    answer(second, approve=True)
    for minutes in range(1, 4):
        sweep_at(start + delivery.COALESCE * minutes)

    assert [payload["title"] for payload in json_receiver.payloads()] == [ASKS]


def test_one_question_left_of_a_burst_goes_as_itself(owner, json_receiver):
    destination = add(json_url(json_receiver))
    asks("Bills")
    start = timezone.now() + AHEAD
    deliver_at(destination, start)
    answered, waiting = asks("Rent"), asks("Flights")
    answer(answered, approve=True)

    sweep_at(start + delivery.COALESCE)

    _, last = json_receiver.payloads()
    assert last["title"] == ASKS
    assert last["message"] == f"Waiting in “Flights”.\n{card(waiting)}"


def test_a_question_of_a_task_that_then_failed_never_follows_the_failure(owner, json_receiver):
    destination = add(json_url(json_receiver))
    asks("Bills")
    start = timezone.now() + AHEAD
    deliver_at(destination, start)
    task = asks("Rent")
    deliver_at(destination, start + timedelta(seconds=5))

    browser_task_cancel(conversation_id=task.conversation_id)  # the task ends before the owner answers
    deliver_at(destination, start + timedelta(seconds=15))
    sweep_at(start + delivery.COALESCE)
    sweep_at(start + delivery.COALESCE * 2)

    assert [payload["title"] for payload in json_receiver.payloads()] == [ASKS, "A browser task was stopped"]


def test_a_question_answered_before_its_retry_is_not_retried(owner, json_receiver):
    json_receiver.status = 500
    destination = add(json_url(json_receiver))
    task = asks("Bills")
    retry_at = delivery.destination_deliver(destination_id=destination.id, now=timezone.now())
    assert retry_at is not None
    json_receiver.status = 200

    answer(task, approve=True)
    delivery.destination_deliver(destination_id=destination.id, now=retry_at)
    sweep_at(retry_at + timedelta(hours=1))

    assert len(json_receiver.received) == 1  # the refused try only
    assert Delivery.objects.get().status == DeliveryStatus.DROPPED


def test_a_proposal_dismissed_inside_the_minute_is_not_sent(task, conversation, json_receiver):
    destination = add(json_url(json_receiver))
    run = run_ends(task, status=RunStatus.RUNNING)
    propose(conversation, run.turn_id, "call-1")
    start = timezone.now() + AHEAD
    deliver_at(destination, start)
    other: Conversation = conversation_create(name="Errands")
    dismissed = propose(other, run.turn_id, "call-2")
    deliver_at(destination, start + timedelta(seconds=10))

    browser_task_dismiss(conversation_id=other.id, proposal_id=dismissed.id)
    sweep_at(start + delivery.COALESCE)

    assert [p["title"] for p in json_receiver.payloads()] == ["An unattended run proposed a browser task"]


def test_messages_about_one_task_keep_their_order(task, json_receiver):
    task.notify_on_completion = True
    task.save()
    destination = add(json_url(json_receiver))
    run_ends(task)
    start = timezone.now() + AHEAD
    deliver_at(destination, start)  # "A task run failed": its kind's minute starts
    run_ends(task)  # failed again: waits for the minute
    run_ends(task, status=RunStatus.COMPLETED)  # then a run completed: another kind, the same task

    deliver_at(destination, start + timedelta(seconds=10))
    assert [p["title"] for p in json_receiver.payloads()] == ["A task run failed"]
    sweep_at(start + delivery.COALESCE)

    assert [p["title"] for p in json_receiver.payloads()] == [
        "A task run failed",
        "A task run failed",
        "A task run completed",
    ]
