"""A tool's concurrency limit holds across worker processes: the database hands out the places."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from flarebot.core.env import BASE_DIR
from tests.support.live import database_url
from tools.models import ToolSlot
from tools.slots import slot_acquire, slot_release

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]


def test_it_never_lets_more_calls_run_than_the_limit_across_two_processes():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "flarebot.settings", "DATABASE_URL": database_url()}
    command = [sys.executable, "-m", "tests.support.slot_holder", "shell_like", "4", "5", "0.4"]
    processes = [
        subprocess.Popen(command, cwd=BASE_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [p.returncode for p in processes] == [0, 0], [err for _, err in outputs]
    held = [json.loads(line) for out, _ in outputs for line in out.splitlines()]

    assert len(held) == 10
    assert all(h["held"] for h in held)  # every call ran, in turn
    moments = sorted([(h["start"], 1) for h in held] + [(h["end"], -1) for h in held])
    running, most = 0, 0
    for _, change in moments:
        running += change
        most = max(most, running)
    assert most == 4  # the limit was reached, and never passed
    assert not ToolSlot.objects.exists()  # every place was given back


def test_it_hands_out_exactly_the_limit_and_takes_over_a_place_whose_holder_died():
    hour = timedelta(hours=1)
    taken = [slot_acquire(tool="shell", limit=2, hold_for=hour) for _ in range(3)]

    assert [t.slot if t else None for t in taken] == [0, 1, None]
    ToolSlot.objects.filter(slot=1).update(expires_at=timezone.now() - timedelta(seconds=1))  # its process died
    again = slot_acquire(tool="shell", limit=2, hold_for=hour)
    assert again is not None
    assert again.slot == 1
    slot_release(held=taken[1])  # the dead holder's late release changes nothing
    assert ToolSlot.objects.get(slot=1).holder == again.holder
    assert slot_acquire(tool="other", limit=1, hold_for=hour) is not None  # limits are per tool
