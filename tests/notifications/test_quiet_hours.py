"""Quiet hours as the owner moves them: what they held goes at their end, as they are now, in one summary."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from conversations.browser_tasks.services import browser_task_dismiss
from notifications import delivery, services
from notifications.models import Delivery, DeliveryStatus
from tasks.models import RunStatus
from tests.notifications.conftest import SETTINGS, add, browser_task_ends, json_url, run_ends, send
from tests.notifications.test_delivery import propose

pytestmark = [pytest.mark.django_db, pytest.mark.database]

ZONE = "Asia/Tokyo"


def quiet(start: datetime, end: datetime) -> dict[str, object]:
    return {"enabled": True, "start": start.strftime("%H:%M"), "end": end.strftime("%H:%M"), "time_zone": ZONE}


def local_now() -> datetime:
    return timezone.now().astimezone(services.zone(ZONE))


def sweep_at(now: datetime) -> None:
    for destination_id in delivery.notifications_sweep(now=now):
        delivery.destination_deliver(destination_id=destination_id, now=now)


def hours_held(owner_client, json_receiver, holding) -> tuple[object, datetime]:
    """Quiet hours from an hour ago to two hours ahead hold what `holding()` tells; return the destination, start."""
    now = local_now()
    saved = send(
        owner_client,
        "put",
        SETTINGS,
        {
            "kinds": {k: True for k in services.KINDS},
            "quiet_hours": quiet(now - timedelta(hours=1), now + timedelta(hours=2)),
        },
    )
    assert saved.status_code == 200, saved.content
    destination = add(json_url(json_receiver))
    holding()
    delivery.destination_deliver(destination_id=destination.id, now=timezone.now())
    assert json_receiver.payloads() == []
    assert Delivery.objects.filter(held=True, status=DeliveryStatus.PENDING).exists()
    return destination, now


def test_moving_the_end_to_now_sends_everything_held_once_in_one_message(
    owner_client, task, conversation, json_receiver
):
    def holding() -> None:
        run_ends(task)
        run_ends(task)
        browser_task_ends(conversation)

    _, now = hours_held(owner_client, json_receiver, holding)

    moved = send(
        owner_client,
        "put",
        SETTINGS,
        {"kinds": {k: True for k in services.KINDS}, "quiet_hours": quiet(now - timedelta(hours=1), now)},
    )
    assert moved.status_code == 200, moved.content
    sweep_at(timezone.now())
    [summary] = json_receiver.payloads()
    for later in (timedelta(minutes=1), timedelta(hours=2, minutes=1), timedelta(days=1)):
        sweep_at(timezone.now() + later)

    assert json_receiver.payloads() == [summary]
    assert summary["title"] == "While quiet hours held them: 3 notifications"
    assert summary["message"] == (
        f"2 task runs failed or were missed; a browser task finished.\n{settings.FLAREBOT_ORIGIN}/"
    )
    assert set(Delivery.objects.values_list("status", flat=True)) == {DeliveryStatus.SENT}


def test_one_held_notification_is_one_notification(owner_client, task, json_receiver):
    _, now = hours_held(owner_client, json_receiver, lambda: run_ends(task))

    services.settings_update(kinds={k: True for k in services.KINDS}, quiet_hours=quiet(now - timedelta(hours=1), now))
    sweep_at(timezone.now())

    [summary] = json_receiver.payloads()
    assert summary["title"] == "While quiet hours held them: 1 notification"
    assert summary["message"] == f"a task run failed or was missed.\n{settings.FLAREBOT_ORIGIN}/"


def test_an_end_moved_earlier_but_ahead_releases_what_is_held_at_the_new_end(owner_client, task, json_receiver):
    _, now = hours_held(owner_client, json_receiver, lambda: (run_ends(task), run_ends(task, status=RunStatus.MISSED)))

    row = services.settings_update(
        kinds={k: True for k in services.KINDS}, quiet_hours=quiet(now - timedelta(hours=1), now + timedelta(hours=1))
    )
    new_end = services.quiet_until(row, timezone.now())
    assert new_end is not None

    sweep_at(new_end - timedelta(seconds=1))
    assert json_receiver.payloads() == []
    sweep_at(new_end)
    [summary] = json_receiver.payloads()
    sweep_at(new_end + timedelta(hours=2))

    assert json_receiver.payloads() == [summary]
    assert summary["title"] == "While quiet hours held them: 2 notifications"


def test_a_proposal_dismissed_while_held_is_not_in_the_summary(owner_client, task, conversation, json_receiver):
    proposals = []

    def holding() -> None:
        run = run_ends(task, status=RunStatus.RUNNING)
        proposals.append(propose(conversation, run.turn_id, "call-1"))
        run_ends(task)

    _, now = hours_held(owner_client, json_receiver, holding)
    browser_task_dismiss(conversation_id=conversation.id, proposal_id=proposals[0].id)

    services.settings_update(kinds={k: True for k in services.KINDS}, quiet_hours=quiet(now - timedelta(hours=1), now))
    sweep_at(timezone.now())

    [summary] = json_receiver.payloads()
    assert summary["title"] == "While quiet hours held them: 1 notification"
    assert summary["message"].startswith("a task run failed or was missed.")
