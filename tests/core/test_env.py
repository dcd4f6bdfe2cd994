"""The typed environment: defaults that depend on the machine."""

from __future__ import annotations

import pytest

from flarebot.core import env


@pytest.mark.parametrize(("cores", "processes"), [(None, 1), (1, 1), (2, 2), (4, 4), (16, 4)])
def test_it_runs_a_worker_process_per_core_up_to_four(monkeypatch, cores, processes):
    monkeypatch.delenv("FLAREBOT_WORKER_PROCESSES", raising=False)
    monkeypatch.setattr(env.os, "cpu_count", lambda: cores)

    assert env.load_config().worker_processes == processes


def test_it_takes_the_operators_number_of_worker_processes(monkeypatch):
    monkeypatch.setenv("FLAREBOT_WORKER_PROCESSES", "3")

    assert env.load_config().worker_processes == 3
