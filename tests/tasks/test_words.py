"""A schedule in words, as the task list shows it: each shape the form's presets make, the others, the fallback."""

from __future__ import annotations

from datetime import datetime

import pytest

from tasks.schedule import schedule_parse, upcoming, zone
from tasks.words import schedule_words


def words(expression: str, timezone: str = "Europe/Berlin") -> str:
    return schedule_words(schedule_parse({"kind": "cron", "expression": expression, "timezone": timezone}))


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        # The form's presets, as the expressions they store.
        ("0 9 * * *", "Every day at 09:00"),
        ("30 8 * * 1-5", "Weekdays at 08:30"),
        ("0 7 * * 0", "Every Sunday at 07:00"),
        ("45 18 * * 3", "Every Wednesday at 18:45"),
        ("0 * * * *", "Every hour"),
        ("0 */6 * * *", "Every 6 hours"),
        ("0 */12 * * *", "Every 12 hours"),
    ],
)
def test_it_says_each_preset_in_words_with_the_zone(expression: str, said: str) -> None:
    assert words(expression) == f"{said}, Europe/Berlin"


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        # Written differently, the same rule.
        ("00 08 * * MON-FRI", "Weekdays at 08:00"),
        ("0 8 * * 5,1-4", "Weekdays at 08:00"),
        ("@daily", "Every day at 00:00"),
        ("@weekly", "Every Sunday at 00:00"),
        ("@hourly", "Every hour"),
        ("0 9 * * 7", "Every Sunday at 09:00"),
        ("0 9 * * 0-6", "Every day at 09:00"),
        # Other plain shapes.
        ("0 10 * * sat,sun", "Weekends at 10:00"),
        ("0 9 * * 1,3,5", "Every Monday, Wednesday and Friday at 09:00"),
        ("0 9 * * 5,1", "Every Monday and Friday at 09:00"),
        ("0 9,17 * * 1-5", "Weekdays at 09:00 and 17:00"),
        ("15 * * * *", "Every hour at 15 minutes past"),
        ("30 */2 * * 1-5", "Every 2 hours at 30 minutes past on weekdays"),
        ("0 */4 * * 6", "Every 4 hours on Saturdays"),
        ("*/15 * * * *", "Every 15 minutes"),
        ("* * * * *", "Every minute"),
        ("0 9 1 * *", "Every month on the 1st at 09:00"),
        ("0 9 22 * *", "Every month on the 22nd at 09:00"),
        ("0 12 13 * *", "Every month on the 13th at 12:00"),
        ("@monthly", "Every month on the 1st at 00:00"),
        ("@yearly", "Every year on 1 January at 00:00"),
        ("30 6 24 dec *", "Every year on 24 December at 06:30"),
    ],
)
def test_it_says_other_plain_shapes_in_words(expression: str, said: str) -> None:
    assert words(expression) == f"{said}, Europe/Berlin"


@pytest.mark.parametrize(
    "expression",
    [
        "0 9 1-7 * 1",  # both day fields: either matching fires
        "0 */5 * * *",  # 5 does not divide the day: 20:00 is followed by 00:00
        "*/7 * * * *",
        "0 9 31 * *",  # not every month has it
        "0 9 29 2 *",
        "0 9 * 12 *",  # a month field alone
        "0 1,2,3,4,5 * * *",  # more times than read well
        "* 9 * * *",
        "0 8-18/2 * * *",
        "5,35 9 * * *",
    ],
)
def test_it_falls_back_to_the_cron_text_without_a_plain_wording(expression: str) -> None:
    normal = schedule_parse({"kind": "cron", "expression": expression}).expression
    assert words(expression, "America/New_York") == f"Cron {normal}, America/New_York"


def test_it_says_a_one_off_in_its_own_zone() -> None:
    once = schedule_parse({"kind": "once", "at": "2096-02-29T09:30:00Z", "timezone": "Europe/Berlin"})
    assert schedule_words(once) == "Once, Wed 29 Feb 2096 at 10:30, Europe/Berlin"
    tokyo = schedule_parse({"kind": "once", "at": "2096-02-29T09:30:15Z", "timezone": "Asia/Tokyo"})
    assert schedule_words(tokyo) == "Once, Wed 29 Feb 2096 at 18:30:15, Asia/Tokyo"
    assert schedule_words(schedule_parse({"kind": "once", "at": "2096-02-29T09:30:00Z"})).endswith("09:30, UTC")


def test_the_next_three_runs_of_a_preset_keep_its_wall_clock_across_a_change_in_berlin() -> None:
    # Weekdays at 08:00 over the weekend Berlin moves to summer time (29 March 2026).
    schedule = schedule_parse({"kind": "cron", "expression": "0 8 * * 1-5", "timezone": "Europe/Berlin"})
    start = datetime.fromisoformat("2026-03-26T12:00:00+00:00")
    runs = upcoming(schedule, start=start, count=3)
    berlin = zone("Europe/Berlin")
    assert [at.astimezone(berlin).strftime("%a %d %H:%M%z") for at in runs] == [
        "Fri 27 08:00+0100",
        "Mon 30 08:00+0200",
        "Tue 31 08:00+0200",
    ]
    assert [at.strftime("%H:%MZ") for at in runs] == ["07:00Z", "06:00Z", "06:00Z"]
    assert schedule_words(schedule) == "Weekdays at 08:00, Europe/Berlin"
