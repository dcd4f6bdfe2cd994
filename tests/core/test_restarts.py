"""The supervisor's restart policy: a growing pause, then giving up on a process that keeps crashing."""

from __future__ import annotations

from flarebot.core.restarts import RESTART_WINDOW_SECONDS, Restarts


def test_each_crash_within_the_window_doubles_the_pause_and_one_more_than_five_gives_up():
    restarts = Restarts()

    pauses = [restarts.crashed("worker", now=100.0 + n) for n in range(6)]

    assert pauses == [1.0, 2.0, 4.0, 8.0, 16.0, None]
    assert restarts.count("worker") == 6


def test_crashes_older_than_the_window_are_forgiven():
    restarts = Restarts()
    for n in range(5):
        restarts.crashed("worker", now=float(n))

    assert restarts.crashed("worker", now=3.5 + RESTART_WINDOW_SECONDS) == 2.0  # the last one is still within
    assert restarts.crashed("worker", now=10.0 + 2 * RESTART_WINDOW_SECONDS) == 1.0


def test_each_process_counts_its_own_crashes():
    restarts = Restarts()
    for n in range(5):
        restarts.crashed("worker", now=float(n))

    assert restarts.crashed("beat", now=5.0) == 1.0
    assert restarts.count("worker") == 5
