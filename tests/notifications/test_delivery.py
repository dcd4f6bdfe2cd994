"""From an event to the owner's destinations: exactly the expected messages, once, without floods."""

from __future__ import annotations

import base64
import threading
import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from conversations.browser_tasks.services import browser_task_propose
from conversations.models import Event
from conversations.turns import turn_submit
from notifications import delivery, services
from notifications import jobs as notifications_jobs
from notifications.models import Delivery, DeliveryStatus, Notification
from settings_ui.selectors import attention_items
from tasks.models import RunStatus
from tests.notifications.conftest import (
    PAGE,
    SECRET,
    SETTINGS,
    TYPED,
    add,
    browser_task_ends,
    json_url,
    mail_url,
    ntfy_url,
    question_opens,
    run_ends,
)

pytestmark = [pytest.mark.django_db, pytest.mark.database]


def deliver(destination, *, after: timedelta = timedelta(0)):
    return delivery.destination_deliver(destination_id=destination.id, now=timezone.now() + after)


def test_it_sends_a_failed_run_to_a_json_webhook(task, json_receiver):
    destination = add(json_url(json_receiver))
    run = run_ends(task)

    deliver(destination)

    [payload] = json_receiver.payloads()
    assert payload["title"] == "A task run failed"
    assert payload["message"] == (
        "Task “Check the bank” in “Morning reports”.\n"
        f"{settings.FLAREBOT_ORIGIN}/?c={task.conversation_id}#turn-{run.turn_id}"
    )
    assert json_receiver.received[0].path == f"/hook/{SECRET}"
    deliver(destination, after=timedelta(minutes=5))
    assert len(json_receiver.payloads()) == 1


def test_it_sends_a_question_to_an_ntfy_server(conversation, ntfy_receiver):
    destination = add(ntfy_url(ntfy_receiver))
    task = question_opens(conversation, kind="sign_in")

    deliver(destination)

    [payload] = ntfy_receiver.payloads()
    assert payload["topic"] == "flarebot"
    assert payload["title"] == "A browser task needs you to sign in"
    assert payload["message"] == (
        "Waiting in “Morning reports”.\n"
        f"{settings.FLAREBOT_ORIGIN}/?c={conversation.id}#browser-task-{task.proposal_id}"
    )
    credentials = base64.b64encode(f"owner:{SECRET}".encode()).decode()
    assert ntfy_receiver.received[0].headers["Authorization"] == f"Basic {credentials}"


def test_a_questions_link_opens_the_card_the_needs_you_list_opens(conversation, json_receiver):
    destination = add(json_url(json_receiver))
    question_opens(conversation)

    deliver(destination)

    [payload] = json_receiver.payloads()
    [waiting] = attention_items()
    assert payload["message"].endswith(f"{settings.FLAREBOT_ORIGIN}{waiting['path']}")
    assert waiting["path"].startswith(f"/?c={conversation.id}#browser-task-")


def test_it_sends_a_finished_browser_task_by_email(conversation, mail_receiver):
    destination = add(mail_url(mail_receiver))
    task = browser_task_ends(conversation)

    deliver(destination)

    [message] = mail_receiver.messages
    assert message["Subject"] == "A browser task finished"
    assert message["To"] == "owner@example.com"
    assert mail_receiver.logins == [("owner", SECRET)]
    text = (
        message.get_payload(decode=True)
        if not message.is_multipart()
        else message.get_payload(0).get_payload(decode=True)
    )
    assert f"/?c={conversation.id}#browser-task-{task.proposal_id}".encode() in text


def test_no_payload_carries_a_secret_typed_text_or_page_text(
    conversation, task, json_receiver, ntfy_receiver, mail_receiver, caplog
):
    destinations = [add(json_url(json_receiver)), add(ntfy_url(ntfy_receiver)), add(mail_url(mail_receiver))]
    question_opens(conversation)
    browser_task_ends(conversation)
    run_ends(task)

    for destination in destinations:
        deliver(destination)

    sent = json_receiver.raw() + ntfy_receiver.raw() + b"".join(mail_receiver.raw)
    assert len(json_receiver.received) == len(ntfy_receiver.received) == len(mail_receiver.messages) == 3
    for word in (TYPED, PAGE):
        assert word.encode() not in sent
    assert SECRET.encode() not in json_receiver.raw().replace(f"/hook/{SECRET}".encode(), b"")
    stored = [
        str(row)
        for row in Notification.objects.values_list("title", "summary", "path").union(
            Notification.objects.values_list("key", "kind", "path")
        )
    ]
    assert not any(word in line for line in stored for word in (SECRET, TYPED, PAGE))
    assert all(SECRET not in record.getMessage() for record in caplog.records)


def test_a_failing_destination_gets_the_retries_then_the_failure_shows_in_settings(task, json_receiver, owner_client):
    json_receiver.status = 500
    destination = add(json_url(json_receiver), label="Webhook")
    run_ends(task)

    now = timezone.now()
    for _ in range(delivery.MAX_ATTEMPTS + 2):
        delivery.destination_deliver(destination_id=destination.id, now=now)
        now += timedelta(hours=1)

    assert len(json_receiver.received) == delivery.MAX_ATTEMPTS
    [failure] = owner_client.get(SETTINGS).json()["failures"]
    assert failure["destination_label"] == "Webhook"
    assert failure["kind"] == "run_failed"
    assert failure["title"] == "A task run failed"
    assert failure["attempts"] == delivery.MAX_ATTEMPTS
    assert failure["error"].startswith("The destination did not accept the message")
    assert SECRET not in str(failure)


def test_a_retry_waits_for_its_backoff(task, json_receiver):
    json_receiver.status = 500
    destination = add(json_url(json_receiver))
    run_ends(task)

    retry_at = deliver(destination)
    assert retry_at is not None
    delivery.destination_deliver(destination_id=destination.id, now=retry_at - timedelta(seconds=1))
    assert len(json_receiver.received) == 1
    json_receiver.status = 200
    delivery.destination_deliver(destination_id=destination.id, now=retry_at)
    assert len(json_receiver.received) == 2
    assert Delivery.objects.get().status == DeliveryStatus.SENT


def test_a_restart_mid_retry_sends_nothing_twice(task, json_receiver):
    json_receiver.status = 500
    destination = add(json_url(json_receiver))
    run_ends(task)
    retry_at = deliver(destination)
    json_receiver.status = 200

    # After a restart the broker delivers the retry's job again and the sweep finds it too.
    delivery.destination_deliver(destination_id=destination.id, now=retry_at)
    delivery.destination_deliver(destination_id=destination.id, now=retry_at)
    for destination_id in delivery.notifications_sweep(now=retry_at + timedelta(minutes=10)):
        delivery.destination_deliver(destination_id=destination_id, now=retry_at + timedelta(minutes=10))

    assert len(json_receiver.payloads()) == 2  # the refused try, then the one that arrived
    assert json_receiver.payloads()[0] == json_receiver.payloads()[1]


def test_a_worker_that_stopped_while_sending_leaves_it_failed_not_sent_again(task, json_receiver, owner_client):
    destination = add(json_url(json_receiver))
    run_ends(task)
    now = timezone.now()
    delivery._claim(Delivery.objects.all(), now)  # the worker stops here

    due = delivery.notifications_sweep(now=now + delivery.STALE_CLAIM + timedelta(seconds=1))
    for destination_id in due:
        delivery.destination_deliver(destination_id=destination_id, now=now + timedelta(minutes=5))
    deliver(destination, after=timedelta(minutes=10))

    assert json_receiver.received == []
    [failure] = owner_client.get(SETTINGS).json()["failures"]
    assert failure["error"] == delivery.STALE_MESSAGE


def test_sixty_runs_in_a_minute_give_one_message_per_destination(task, json_receiver, ntfy_receiver):
    destinations = [add(json_url(json_receiver)), add(ntfy_url(ntfy_receiver))]
    for _ in range(60):
        run_ends(task)

    for destination in destinations:
        deliver(destination)
        deliver(destination, after=timedelta(seconds=30))

    for receiver in (json_receiver, ntfy_receiver):
        [payload] = receiver.payloads()
        assert payload["title"] == "60 task runs failed or were missed"
        assert payload["message"].startswith("Latest: A task run failed. Task “Check the bank”")


def test_a_burst_after_a_message_waits_for_the_minute_and_goes_as_one(task, json_receiver):
    destination = add(json_url(json_receiver))
    run_ends(task)
    start = timezone.now()
    delivery.destination_deliver(destination_id=destination.id, now=start)
    for _ in range(59):
        run_ends(task)

    delivery.destination_deliver(destination_id=destination.id, now=start + timedelta(seconds=59))
    assert len(json_receiver.payloads()) == 1
    for destination_id in delivery.notifications_sweep(now=start + timedelta(seconds=60)):
        delivery.destination_deliver(destination_id=destination_id, now=start + timedelta(seconds=60))

    first, second = json_receiver.payloads()
    assert first["title"] == "A task run failed"
    assert second["title"] == "59 task runs failed or were missed"


def test_kinds_are_the_owners_choice(task, conversation, json_receiver, owner_client):
    destination = add(json_url(json_receiver))
    run_ends(task, status=RunStatus.COMPLETED)  # off by default
    run_ends(task, status=RunStatus.CANCELLED)  # never told
    deliver(destination)
    assert json_receiver.payloads() == []

    task.notify_on_completion = True
    task.save()
    run_ends(task, status=RunStatus.COMPLETED)
    run_ends(task, status=RunStatus.MISSED, missed=3)
    deliver(destination)
    titles = sorted(p["title"] for p in json_receiver.payloads())
    assert titles == ["3 task runs were missed", "A task run completed"]


def test_quiet_hours_hold_all_but_questions_and_send_a_summary_when_they_end(task, conversation, json_receiver):
    now = timezone.now().astimezone(services.zone("Asia/Tokyo"))
    start = (now - timedelta(hours=1)).strftime("%H:%M")
    end_at = now + timedelta(hours=2)
    services.settings_update(
        kinds={kind: True for kind in services.KINDS},
        quiet_hours={"enabled": True, "start": start, "end": end_at.strftime("%H:%M"), "time_zone": "Asia/Tokyo"},
    )
    destination = add(json_url(json_receiver))
    run_ends(task)
    run_ends(task, status=RunStatus.COMPLETED)
    browser_task_ends(conversation)
    question_opens(conversation)

    deliver(destination)
    deliver(destination, after=timedelta(hours=1))
    assert [p["title"] for p in json_receiver.payloads()] == ["A browser task waits for your approval"]

    deliver(destination, after=timedelta(hours=2, minutes=1))
    _, summary = json_receiver.payloads()
    assert summary["title"] == "While quiet hours held them: 3 notifications"
    assert summary["message"] == (
        f"a task run failed or was missed; a task run completed; a browser task finished.\n{settings.FLAREBOT_ORIGIN}/"
    )


def propose(conversation, turn_id, call: str):
    return browser_task_propose(
        conversation_id=conversation.id,
        turn_id=turn_id,
        tool_call_id=call,
        goal=f"Pay the bill; the page said {PAGE}",
        start_url="https://bank.example/pay",
        restrictions=[],
    )


def test_only_a_proposal_of_an_unattended_run_is_told(task, conversation, json_receiver):
    destination = add(json_url(json_receiver))
    attended, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="Pay my bill.")
    propose(conversation, attended.id, "call-1")
    run = run_ends(task, status=RunStatus.RUNNING)
    proposal = propose(conversation, run.turn_id, "call-2")

    deliver(destination)

    [payload] = json_receiver.payloads()
    assert payload["title"] == "An unattended run proposed a browser task"
    assert payload["message"] == (
        "Task “Check the bank” in “Morning reports”: start or dismiss it.\n"
        f"{settings.FLAREBOT_ORIGIN}/?c={conversation.id}#browser-task-{proposal.id}"
    )


def test_the_job_gets_only_the_destinations_id_after_commit(
    task, json_receiver, monkeypatch, django_capture_on_commit_callbacks
):
    destination = add(json_url(json_receiver))
    sent: list[tuple[str, object]] = []
    monkeypatch.setattr(services.current_app, "send_task", lambda name, args, eta=None: sent.append((name, args)))

    with django_capture_on_commit_callbacks(execute=True):
        run_ends(task)
        assert sent == []

    assert sent == [("notifications.jobs.destination_deliver", [str(destination.id)])]
    notifications_jobs.destination_deliver(str(destination.id))
    assert [p["title"] for p in json_receiver.payloads()] == ["A task run failed"]


@pytest.mark.django_db(transaction=True)
def test_two_workers_at_once_send_a_delivery_once(task, json_receiver):
    destination = add(json_url(json_receiver))
    run_ends(task)
    json_receiver.delay = 0.3  # the first send is still on its way when the second worker looks
    now = timezone.now()

    def worker() -> None:
        try:
            delivery.destination_deliver(destination_id=destination.id, now=now)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(json_receiver.payloads()) == 1
    assert Delivery.objects.get().status == DeliveryStatus.SENT


def test_a_broken_notification_never_undoes_its_event(task, monkeypatch):
    add("json://127.0.0.1:9/hook")

    def broken(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(services, "told_of", broken)
    run = run_ends(task)

    assert Event.objects.filter(conversation_id=run.conversation_id, kind="task_run.updated").count() == 1
    assert not Notification.objects.exists()


def test_a_message_still_on_its_way_starts_the_minute(task, json_receiver):
    destination = add(json_url(json_receiver))
    run_ends(task)
    now = timezone.now()
    delivery._claim(Delivery.objects.all(), now)  # another worker is sending it right now
    run_ends(task)

    delivery.destination_deliver(destination_id=destination.id, now=now + timedelta(seconds=10))

    assert json_receiver.received == []
    waiting = Delivery.objects.get(status=DeliveryStatus.PENDING)
    assert waiting.due_at == now + delivery.COALESCE
