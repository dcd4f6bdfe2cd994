"""A schedule in words, as the owner reads it in the task list: "Weekdays at 08:00, Europe/Berlin".

Only shapes with a plain wording are put in words: one to four times of every day, of
weekdays, of weekends, of named days, of one day of the month or of the year, and every N
minutes or hours when N divides the hour or the day evenly (so that "every 5 hours" never
stands for 00:00, 05:00, ..., 20:00 and then 00:00 again). Any other expression (both day
fields restricted, where either matching fires; a month field; the 29th and later, which
some months lack) is shown as its cron text, so the words never say more or less than the
expression does. The pages show this text; they never word a schedule themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tasks.schedule import Schedule, zone

DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
TIMES_MAX = 4  # times of day put in words; more read better as the cron text
_WEEKDAYS = frozenset(range(1, 6))
_WEEKENDS = frozenset({0, 6})
_EVERY_DAY = frozenset(range(7))


def schedule_words(schedule: Schedule) -> str:
    """Return the schedule in words with its zone, or a cron expression without a plain wording as its text."""
    if schedule.kind == "once":
        assert schedule.at is not None
        local = schedule.at.astimezone(zone(schedule.timezone))
        clock = _clock(local.hour, local.minute, local.second)
        return f"Once, {local:%a} {local.day} {local:%b %Y} at {clock}, {schedule.timezone}"
    words = cron_words(schedule.expression)
    return f"{words or 'Cron ' + schedule.expression}, {schedule.timezone}"


def cron_words(expression: str) -> str | None:
    """Return a normalized cron expression in words (without its zone), or None when it has no plain wording."""
    minute, hour, day_of_month, month, day_of_week = expression.split()
    days = _days(day_of_month, month, day_of_week)
    if days is None:
        return None
    times = _times(minute, hour)
    if times is not None:
        return _at(days, times)
    every = _every(minute, hour)
    if every is None:
        return None
    return every + _on(days)


@dataclass(frozen=True)
class _Days:
    """The days an expression runs on: every day, weekdays, weekends, named days, a day of each month or year."""

    kind: Literal["every day", "weekdays", "weekends", "days", "month", "year"]
    weekdays: tuple[int, ...] = ()
    day: int = 0
    month: int = 0


def _days(day_of_month: str, month: str, day_of_week: str) -> _Days | None:
    weekdays = _values(day_of_week, 0, 7)
    if weekdays is None:
        return None
    weekdays = {0 if day == 7 else day for day in weekdays}
    if day_of_month == "*" and month == "*":
        if weekdays == _EVERY_DAY:
            return _Days("every day")
        if weekdays == _WEEKDAYS:
            return _Days("weekdays")
        if weekdays == _WEEKENDS:
            return _Days("weekends")
        # Monday first, Sunday last, as a week reads.
        return _Days("days", weekdays=tuple(sorted(weekdays, key=lambda day: (day + 6) % 7)))
    if day_of_week != "*" or not day_of_month.isdigit():
        return None
    day = int(day_of_month)
    if day >= 29:
        return None  # not every month (or year) has it
    if month == "*":
        return _Days("month", day=day)
    if month.isdigit():
        return _Days("year", day=day, month=int(month))
    return None


def _values(field: str, low: int, high: int) -> set[int] | None:
    """The numbers a normalized field stands for (None when it cannot be read)."""
    values: set[int] = set()
    for item in field.split(","):
        spec, _, step = item.partition("/")
        if spec == "*":
            first, last = low, high
        elif spec.isdigit():
            first = last = int(spec)
        elif "-" in spec:
            start, end = spec.split("-")
            first, last = int(start), int(end)
        else:
            return None
        values |= set(range(first, last + 1, int(step) if step else 1))
    return values


def _times(minute: str, hour: str) -> list[str] | None:
    """The times of day of a single minute at listed hours (not `*` or a step), at most TIMES_MAX."""
    if not minute.isdigit() or "*" in hour or "/" in hour:
        return None
    hours = _values(hour, 0, 23)
    if hours is None or len(hours) > TIMES_MAX:
        return None
    return [_clock(h, int(minute)) for h in sorted(hours)]


def _every(minute: str, hour: str) -> str | None:
    """Every N minutes or hours, when N divides the hour or the day evenly."""
    if hour == "*" and (minute == "*" or minute == "*/1"):
        return "Every minute"
    if hour == "*" and minute.startswith("*/"):
        step = int(minute[2:])
        return f"Every {step} minutes" if 60 % step == 0 else None
    if not minute.isdigit():
        return None
    past = f" at {int(minute)} minute{'' if minute == '1' else 's'} past" if minute != "0" else ""
    if hour in ("*", "*/1"):
        return f"Every hour{past}"
    if hour.startswith("*/") and 24 % int(hour[2:]) == 0:
        return f"Every {int(hour[2:])} hours{past}"
    return None


def _at(days: _Days, times: list[str]) -> str:
    at = "at " + _listed(times)
    if days.kind == "every day":
        return f"Every day {at}"
    if days.kind in ("weekdays", "weekends"):
        return f"{days.kind.capitalize()} {at}"
    if days.kind == "days":
        return f"Every {_listed([DAYS[n] for n in days.weekdays])} {at}"
    if days.kind == "month":
        return f"Every month on the {_ordinal(days.day)} {at}"
    return f"Every year on {days.day} {MONTHS[days.month - 1]} {at}"


def _on(days: _Days) -> str:
    if days.kind == "every day":
        return ""
    if days.kind in ("weekdays", "weekends"):
        return f" on {days.kind}"
    if days.kind == "days":
        return " on " + _listed([DAYS[n] + "s" for n in days.weekdays])
    if days.kind == "month":
        return f" on the {_ordinal(days.day)} of every month"
    return f" on {days.day} {MONTHS[days.month - 1]}"


def _clock(hour: int, minute: int, second: int = 0) -> str:
    return f"{hour:02d}:{minute:02d}" + (f":{second:02d}" if second else "")


def _listed(items: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _ordinal(day: int) -> str:
    suffix = "th" if 11 <= day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"
