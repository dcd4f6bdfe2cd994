"""The System section's Docker rows, as a worker's probes find them on this machine."""

from __future__ import annotations

import pytest

from flarebot.core.probes import probe_labels, probes_run
from tools.shell.engine import SANDBOX_IMAGE, docker_probe, sandbox_image_probe

pytestmark = pytest.mark.django_db(transaction=True)

ABSENT = "unix:///nonexistent/flarebot-test/docker.sock"


def test_it_registers_the_docker_and_sandbox_image_probes():
    labels = probe_labels()

    assert labels["docker"] == "Docker engine (shell)"
    assert labels["sandbox_image"] == "Sandbox image (shell)"
    found = probes_run()
    assert (found["docker"]["state"], found["sandbox_image"]["state"]) == ("ok", "ok")


def test_it_finds_the_engine_and_the_image():
    engine = docker_probe()
    image = sandbox_image_probe()

    assert engine["state"] == "ok"
    assert engine["detail"].startswith("Docker ")
    assert image["state"] == "ok"
    assert image["detail"].startswith(f"{SANDBOX_IMAGE} (")


def test_it_says_how_to_start_an_engine_when_none_answers(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", ABSENT)

    engine = docker_probe()
    image = sandbox_image_probe()

    assert engine == {
        "state": "missing",
        "detail": f"No Docker engine answers at {ABSENT}.",
        "fix": engine["fix"],
    }
    assert "dockerd --bridge=none --iptables=false --ip6tables=false" in engine["fix"]
    assert image["state"] == "missing"
    assert "start" in image["fix"].lower()


def test_it_says_how_to_build_a_missing_image(monkeypatch):
    from tools.shell import engine as engine_module

    monkeypatch.setattr(engine_module, "SANDBOX_IMAGE", "flarebot-sandbox:never-built")

    image = engine_module.sandbox_image_probe()

    assert image["state"] == "missing"
    assert image["detail"] == "The engine has no flarebot-sandbox:never-built image."
    assert ".venv/bin/python manage.py build_sandbox_image" in image["fix"]


def test_it_names_where_the_engine_is_expected_without_a_user_part(monkeypatch):
    from tools.shell.engine import engine_where

    monkeypatch.setenv("DOCKER_HOST", "ssh://deploy:hunter2@sandbox.example:22")
    assert engine_where() == "ssh://sandbox.example:22"
    monkeypatch.setenv("DOCKER_HOST", "tcp://sandbox-engine:2376")
    assert engine_where() == "tcp://sandbox-engine:2376"
    monkeypatch.delenv("DOCKER_HOST")
    assert engine_where() == "the local socket /var/run/docker.sock"
