"""The supervisor's restart policy (a growing pause, then giving up), and when a starting process is late."""

from __future__ import annotations

from flarebot.core.restarts import RESTART_WINDOW_SECONDS, ReadyDeadlines, Restarts


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


def test_a_process_is_late_once_its_own_start_is_older_than_the_timeout():
    deadlines = ReadyDeadlines(timeout=120.0)
    deadlines.starting("web", now=0.0)
    deadlines.starting("worker", now=0.0)
    deadlines.ended("web")  # ready in time

    assert deadlines.late(now=120.0) == []
    assert deadlines.late(now=120.5) == ["worker"]
    assert deadlines.late(now=500.0) == []  # said once


def test_a_process_started_again_after_a_crash_is_late_from_its_new_start():
    deadlines = ReadyDeadlines(timeout=120.0)
    deadlines.starting("worker", now=0.0)
    deadlines.ended("worker")  # ready
    deadlines.starting("worker", now=1000.0)  # crashed, started again, and hangs

    assert deadlines.late(now=1119.0) == []
    assert deadlines.late(now=1121.0) == ["worker"]
