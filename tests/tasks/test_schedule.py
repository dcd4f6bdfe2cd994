"""Schedules: what is accepted and how it is normalized, and when a cron schedule occurs, at fixed instants."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from tasks.errors import ScheduleInvalid
from tasks.schedule import Schedule, occurrences_between, schedule_parse, upcoming, zone


def cron(expression: str, timezone: str = "UTC") -> Schedule:
    return schedule_parse({"kind": "cron", "expression": expression, "timezone": timezone})


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def shown(schedule: Schedule, start: str, count: int) -> list[str]:
    """The next instants after `start`, as wall-clock times with their offset in the schedule's zone."""
    tz = zone(schedule.timezone)
    return [i.astimezone(tz).strftime("%Y-%m-%d %H:%M%z") for i in upcoming(schedule, start=at(start), count=count)]


# ---- daylight saving, at fixed instants ------------------------------------------------


def test_it_runs_a_time_that_does_not_exist_once_at_the_first_instant_after_the_change_in_berlin() -> None:
    # 2026-03-29: clocks go from 02:00 CET to 03:00 CEST; 02:30 does not exist that day.
    assert shown(cron("30 2 * * *", "Europe/Berlin"), "2026-03-27T12:00:00Z", 4) == [
        "2026-03-28 02:30+0100",
        "2026-03-29 03:00+0200",
        "2026-03-30 02:30+0200",
        "2026-03-31 02:30+0200",
    ]


def test_it_runs_a_time_that_occurs_twice_once_in_berlin() -> None:
    # 2026-10-25: clocks go back from 03:00 CEST to 02:00 CET; 02:30 happens twice.
    schedule = cron("30 2 * * *", "Europe/Berlin")
    assert shown(schedule, "2026-10-24T12:00:00Z", 3) == [
        "2026-10-25 02:30+0200",
        "2026-10-26 02:30+0100",
        "2026-10-27 02:30+0100",
    ]
    # Asked from inside the repeated hour's second pass, the day's 02:30 is behind it.
    assert upcoming(schedule, start=at("2026-10-25T01:15:00Z"), count=1) == [at("2026-10-26T01:30:00Z")]


def test_it_keeps_the_new_york_rules_at_both_changes() -> None:
    # 2026-03-08: 02:00 EST -> 03:00 EDT; 2026-11-01: 02:00 EDT -> 01:00 EST.
    assert shown(cron("30 2 * * *", "America/New_York"), "2026-03-07T00:00:00Z", 3) == [
        "2026-03-07 02:30-0500",
        "2026-03-08 03:00-0400",
        "2026-03-09 02:30-0400",
    ]
    assert shown(cron("30 1 * * *", "America/New_York"), "2026-10-31T00:00:00Z", 3) == [
        "2026-10-31 01:30-0400",
        "2026-11-01 01:30-0400",
        "2026-11-02 01:30-0500",
    ]


def test_it_reads_every_field_as_wall_clock_time_across_a_change() -> None:
    # Every half hour: the skipped hour's times all become the one instant after the gap;
    # the repeated hour's times run on their first pass only.
    assert shown(cron("*/30 * * * *", "Europe/Berlin"), "2026-03-29T00:00:00Z", 4) == [
        "2026-03-29 01:00+0100",
        "2026-03-29 01:30+0100",
        "2026-03-29 03:00+0200",
        "2026-03-29 03:30+0200",
    ]
    assert shown(cron("*/30 * * * *", "America/New_York"), "2026-11-01T05:00:00Z", 4) == [
        "2026-11-01 01:00-0400",
        "2026-11-01 01:30-0400",
        "2026-11-01 02:00-0500",
        "2026-11-01 02:30-0500",
    ]


def test_it_fires_when_either_restricted_day_field_matches() -> None:
    # The 1st of each month, and every Monday (standard cron; Celery's crontab needs both).
    schedule = cron("0 9 1 * 1")
    assert upcoming(schedule, start=at("2026-11-30T10:00:00Z"), count=5) == [
        at("2026-12-01T09:00:00Z"),  # a Tuesday, the 1st
        at("2026-12-07T09:00:00Z"),
        at("2026-12-14T09:00:00Z"),
        at("2026-12-21T09:00:00Z"),
        at("2026-12-28T09:00:00Z"),
    ]
    # A star in one day field leaves only the other.
    assert upcoming(cron("0 9 * * 1"), start=at("2026-11-30T10:00:00Z"), count=1) == [at("2026-12-07T09:00:00Z")]


def test_it_counts_the_occurrences_between_two_instants() -> None:
    tail, count = occurrences_between(
        cron("*/10 * * * *"), first=at("2026-01-01T00:00:00Z"), until=at("2026-01-01T01:05:00Z")
    )
    assert count == 7
    assert tail == [at("2026-01-01T00:50:00Z"), at("2026-01-01T01:00:00Z")]


# ---- what is accepted -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("0 9 * * 1", "0 9 * * 1"),
        ("  05\t09  *  *   01 ", "5 9 * * 1"),
        ("0,15,30,45 8-18/2 1-7 */3 0-4,7", "0,15,30,45 8-18/2 1-7 */3 0-4,7"),
        ("00 000 01 1 0", "0 0 1 1 0"),
        ("*/1 * * * *", "*/1 * * * *"),
        ("59 23 31 12 7", "59 23 31 12 7"),
        # Standard cron's names and nicknames, kept in their numeric form.
        ("0 8 * * MON-FRI", "0 8 * * 1-5"),
        ("0 9 1 jan-mar *", "0 9 1 1-3 *"),
        ("30 7 * * sun,Sat", "30 7 * * 0,6"),
        ("0 12 * DEC MON", "0 12 * 12 1"),
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@Annually", "0 0 1 1 *"),
    ],
)
def test_it_normalizes_cron_expressions(raw: str, normal: str) -> None:
    assert cron(raw).expression == normal


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("5/15 * * * *", "The minute “5/15” has a step on a single number: a step goes on * or a range"),
        ("0 9 * * MONDAY", "The day of the week “MONDAY” is not a day's name (SUN-SAT)"),
        ("0 9 * MON *", "The month “MON” is not a month's name (JAN-DEC)"),
        ("@reboot", "The nickname “@reboot” is not one cron knows"),
        ("@daily 5", "is not one cron knows"),
        ("0 0 9 * * 1", "seconds are not accepted"),
        ("0 9 * *", "4 fields"),
        ("60 * * * *", "The minute 60 is outside 0-59."),
        ("0 25 * * *", "The hour 25 is outside 0-23."),
        ("0 0 0 * *", "The day of the month 0 is outside 1-31."),
        ("0 0 * 13 *", "The month 13 is outside 1-12."),
        ("0 0 * * 8", "The day of the week 8 is outside 0-7."),
        ("0 0 5-1 * *", "The day of the month range 5-1 runs backwards."),
        ("*/0 * * * *", "The step 0 of the minute must be from 1 to 60."),
        ("*/61 * * * *", "step 61"),
        ("0 0 L * *", "has letters"),
        ("0 0 * * 1#2", "is not valid"),
        ("0 0 ? * *", "is not valid"),
        ("0 0 30 2 *", "never occurs"),
        ("0 0 31 4,6 *", "never occurs"),
        ("-1 * * * *", "is not valid"),
        (",0 * * * *", "is not valid"),
        ("0 " * 61, "at most 120 characters"),
        ("", "five fields"),
        ("   ", "five fields"),
    ],
)
def test_it_refuses_cron_expressions_outside_the_contract_saying_what_is_accepted(raw: str, says: str) -> None:
    with pytest.raises(ScheduleInvalid) as refused:
        cron(raw)
    assert refused.value.code == "invalid_schedule"
    assert says in refused.value.message
    in_words(refused.value, field="schedule.expression")


def in_words(error: ScheduleInvalid, *, field: str) -> None:
    """A refusal a person reads: a sentence without field paths or code marks; the field beside it."""
    message = error.message
    assert message[0].isupper(), message
    assert message.endswith("."), message
    assert "`" not in message, message
    assert not re.search(r"\bschedule\.|expression:|timezone|day-of", message), message
    assert error.extra == {"fields": {field: [message]}}


def test_it_takes_exactly_120_characters_and_no_more() -> None:
    ok = "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34 9 * * 1"
    ok += " " * (120 - len(ok))
    assert len(ok) == 120
    assert cron(ok).expression == ok.strip()
    with pytest.raises(ScheduleInvalid, match=r"^The cron expression may have at most 120 characters\.$"):
        cron(ok + " ")


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("UTC", "UTC"),
        ("Etc/UTC", "UTC"),
        ("zulu", "UTC"),
        ("europe/berlin", "Europe/Berlin"),
        ("America/New_York", "America/New_York"),
        ("Asia/Kolkata", "Asia/Kolkata"),
    ],
)
def test_it_names_zones_as_the_zone_database_spells_them(raw: str, name: str) -> None:
    assert cron("0 9 * * *", raw).timezone == name


def test_it_defaults_to_utc_and_refuses_unknown_zones() -> None:
    assert schedule_parse({"kind": "cron", "expression": "0 9 * * *"}).timezone == "UTC"
    for raw in ("Mars/Olympus", "", "+01:00", "CET ", 5, None, "x" * 65, "posix/Europe/Berlin", "localtime"):
        with pytest.raises(ScheduleInvalid, match="time zone") as refused:
            cron("0 9 * * *", raw)  # type: ignore[arg-type]
        in_words(refused.value, field="schedule.timezone")
    with pytest.raises(ScheduleInvalid) as refused:
        cron("0 9 * * *", "Mars/Olympus")
    assert refused.value.message == (
        "The time zone “Mars/Olympus” is not an IANA time zone; give one such as Europe/Berlin or UTC."
    )


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("2096-02-29T09:30:00Z", "2096-02-29T09:30:00Z"),
        ("2096-02-29T10:30:00+01:00", "2096-02-29T09:30:00Z"),
        ("2096-03-01T00:30:00+14:00", "2096-02-29T10:30:00Z"),
        ("2096-02-28T21:00:00-12:30", "2096-02-29T09:30:00Z"),
        ("2096-02-29T09:30:00+00:00", "2096-02-29T09:30:00Z"),
    ],
)
def test_it_normalizes_one_offs_to_utc(raw: str, normal: str) -> None:
    assert schedule_parse({"kind": "once", "at": raw}).as_json() == {"kind": "once", "at": normal, "timezone": "UTC"}


def test_a_one_off_keeps_the_zone_it_was_written_in_apart_from_its_instant() -> None:
    berlin = schedule_parse({"kind": "once", "at": "2096-02-29T10:30:00+01:00", "timezone": "europe/berlin"})
    assert berlin.as_json() == {"kind": "once", "at": "2096-02-29T09:30:00Z", "timezone": "Europe/Berlin"}
    assert berlin.at == schedule_parse({"kind": "once", "at": "2096-02-29T09:30:00Z"}).at
    with pytest.raises(ScheduleInvalid) as refused:
        schedule_parse({"kind": "once", "at": "2096-02-29T09:30:00Z", "timezone": "Mars/Olympus"})
    in_words(refused.value, field="schedule.timezone")


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("2097-02-29T09:30:00Z", "The date and time 2097-02-29 09:30:00 is not in the calendar."),
        ("2096-04-31T09:30:00Z", "The date and time 2096-04-31 09:30:00 is not in the calendar."),
        ("2096-02-29T24:00:00Z", "The date and time 2096-02-29 24:00:00 is not in the calendar."),
        ("2096-02-29T09:60:00Z", "The date and time 2096-02-29 09:60:00 is not in the calendar."),
        ("2096-02-29T09:30:00-00:00", "The offset -00:00 means an unknown offset"),
        ("2096-02-29T09:30:00+14:01", "The offset must be from -14:00 to +14:00."),
        ("2096-02-29T09:30:00+01:60", "-14:00 to +14:00"),
        ("2096-02-29T09:30:00", "The date and time must be in whole seconds with Z or an offset"),
        ("2096-02-29T09:30:00.000Z", "whole seconds"),
        ("2096-02-29T09:30Z", "whole seconds"),
        ("2096-02-29 09:30:00Z", "whole seconds"),
        ("2096-02-29T09:30:00z", "whole seconds"),
        ("2096-02-29T09:30:00+0100", "whole seconds"),
        (" 2096-02-29T09:30:00Z", "whole seconds"),
        (1234567890, "whole seconds"),
        (None, "whole seconds"),
    ],
)
def test_it_refuses_one_offs_outside_the_contract(raw: object, says: str) -> None:
    with pytest.raises(ScheduleInvalid) as refused:
        schedule_parse({"kind": "once", "at": raw})
    assert says in refused.value.message
    in_words(refused.value, field="schedule.at")


@pytest.mark.parametrize(
    ("raw", "field", "says"),
    [
        (None, "schedule", "The schedule must be an object"),
        ([], "schedule", "The schedule must be an object"),
        ("0 9 * * 1", "schedule", "The schedule must be an object"),
        ({}, "schedule.kind", 'The kind of schedule must be "once" or "cron".'),
        ({"kind": "interval"}, "schedule.kind", 'The kind of schedule must be "once" or "cron".'),
        ({"kind": "once"}, "schedule.at", "The date and time must be in whole seconds"),
        (
            {"kind": "once", "at": "2096-02-29T09:30:00Z", "every": 2},
            "schedule.every",
            "A one-off schedule takes no “every”.",
        ),
        (
            {"kind": "cron", "expression": "0 9 * * 1", "at": "2096-02-29T09:30:00Z"},
            "schedule.at",
            "A repeating schedule takes no “at”.",
        ),
        ({"kind": "cron"}, "schedule.expression", "The cron expression is missing: a cron expression has five fields"),
    ],
)
def test_it_refuses_schedule_objects_of_other_shapes(raw: object, field: str, says: str) -> None:
    with pytest.raises(ScheduleInvalid) as refused:
        schedule_parse(raw)
    assert refused.value.message.startswith(says)
    in_words(refused.value, field=field)
