"""Schedules of tasks: what is accepted, its normal form, and when it occurs.

A schedule is a one-off instant (`once`) or a five-field numeric cron expression read as
wall-clock times of an IANA zone (`cron`). A one-off keeps the zone it was written in too,
so that it is shown and edited in that zone (its instant does not depend on it). Both are
normalized before anything compares them (a creation retry, an unchanged one-off in an
update): whitespace, leading zeros, offsets to UTC, the zone's spelling.

What is refused is said in words (`ScheduleInvalid`): the message never names a field by
its path; the error carries the path beside it.

Occurrences of a cron schedule are the wall-clock times it matches, each mapped to one
instant: a time that does not exist (skipped by a daylight-saving change) maps to the
first instant after the change, a time that occurs twice to its first occurrence, and an
instant is used once however many times map to it. `cronsim` (written for healthchecks)
enumerates the wall-clock times; it reads the day fields as cron does: when both
day-of-month and day-of-week are restricted, either one matching fires (Celery's own
`crontab` requires both, so it is not used).
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any, Literal

from cronsim import CronSim, CronSimError

from tasks.errors import ScheduleInvalid

CRON_MAX = 120  # characters of an expression
UPCOMING = 5  # instants shown ahead
# How many past occurrences one missed run counts at most (a one-minute schedule stopped
# for 70 days); beyond it the count says "at least".
COUNT_MAX = 100_000

# name in words, lowest, highest (day of the week 7 is Sunday, as 0)
_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of the month", 1, 31),
    ("month", 1, 12),
    ("day of the week", 0, 7),
)
_EXPRESSION = "schedule.expression"  # the field every refusal of a cron expression is about
_NUMBER = r"[0-9]{1,4}"
_ITEM = re.compile(rf"^(?:(\*)|({_NUMBER})(?:-({_NUMBER}))?)(?:/({_NUMBER}))?$")
_ACCEPTED = (
    "a cron expression has five fields (minute, hour, day of the month, month, day of the week) of numbers, "
    "* for any, lists (1,15), ranges (1-5) and steps on * or a range (*/15, 8-18/2); months and days may be "
    "named (JAN-DEC, MON-FRI), and @hourly, @daily, @weekly, @monthly and @yearly stand for their expressions"
)
# The nicknames standard cron knows, as the expressions they stand for.
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_NAMES = {
    "month": {
        name: str(number)
        for number, name in enumerate(
            ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"), start=1
        )
    },
    "day of the week": {
        name: str(number) for number, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))
    },
}
_NEVER = "The cron expression never occurs (such as on 30 February)."
_NAMES_SAY = {"month": "a month's name (JAN-DEC)", "day of the week": "a day's name (SUN-SAT)"}
_NAME = re.compile(r"(?<![A-Za-z])[A-Za-z]{3}(?![A-Za-z])")
_INSTANT = re.compile(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(Z|[+-][0-9]{2}:[0-9]{2})$")
OFFSET_MAX = timedelta(hours=14)  # the widest offset any zone uses
_UTC_NAMES = {"utc", "etc/utc", "etc/uct", "uct", "etc/universal", "universal", "etc/zulu", "zulu"}


@dataclass(frozen=True)
class Schedule:
    """A normalized schedule: `at` for a one-off, `expression` for cron; `timezone` for both."""

    kind: Literal["once", "cron"]
    at: datetime | None = None
    expression: str = ""
    timezone: str = "UTC"

    def as_json(self) -> dict[str, Any]:
        """Return the contract's `schedule` object."""
        if self.kind == "once":
            assert self.at is not None
            return {"kind": "once", "at": instant_text(self.at), "timezone": self.timezone}
        return {"kind": "cron", "expression": self.expression, "timezone": self.timezone}


def instant_text(at: datetime) -> str:
    """An instant as a schedule writes it: whole seconds, UTC, `Z`."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def schedule_parse(raw: Any) -> Schedule:
    """Check a schedule object and return it normalized; raise ScheduleInvalid with what is accepted."""
    if not isinstance(raw, dict):
        raise ScheduleInvalid(
            'The schedule must be an object: {"kind": "once", "at": ...} or {"kind": "cron", "expression": ...}.'
        )
    kind = raw.get("kind")
    if kind == "once":
        _only(raw, {"kind", "at", "timezone"})
        at = instant_parse(raw.get("at"))
        return Schedule("once", at=at, timezone=zone_parse(raw.get("timezone", "UTC")))
    if kind == "cron":
        _only(raw, {"kind", "expression", "timezone"})
        zone = zone_parse(raw.get("timezone", "UTC"))
        expression = cron_parse(raw.get("expression"))
        cron_check(expression)
        schedule = Schedule("cron", expression=expression, timezone=zone)
        if next(occurrences(schedule, after=datetime.now(UTC)), None) is None:
            raise ScheduleInvalid(_NEVER, field=_EXPRESSION)
        return schedule
    raise ScheduleInvalid('The kind of schedule must be "once" or "cron".', field="schedule.kind")


def _only(raw: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        name = unknown[0][:40]
        what = "A one-off" if raw["kind"] == "once" else "A repeating"
        raise ScheduleInvalid(f"{what} schedule takes no “{name}”.", field=f"schedule.{name}")


def instant_parse(raw: Any) -> datetime:
    """Parse a one-off instant: whole seconds with `Z` or an explicit offset, a real date; returned in UTC."""
    message = (
        "The date and time must be in whole seconds with Z or an offset, such as 2096-02-29T09:30:00Z "
        "or 2096-02-29T10:30:00+01:00."
    )
    field = "schedule.at"
    if not isinstance(raw, str):
        raise ScheduleInvalid(message, field=field)
    match = _INSTANT.match(raw)
    if match is None:
        raise ScheduleInvalid(message, field=field)
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    offset = match.group(7)
    try:
        local = datetime(year, month, day, hour, minute, second)
    except ValueError:
        shown = f"{raw[:10]} {raw[11:19]}"
        raise ScheduleInvalid(f"The date and time {shown} is not in the calendar.", field=field) from None
    if offset == "Z":
        delta = timedelta(0)
    else:
        if offset == "-00:00":
            raise ScheduleInvalid("The offset -00:00 means an unknown offset; give Z or the real offset.", field=field)
        hours, minutes = int(offset[1:3]), int(offset[4:6])
        delta = timedelta(hours=hours, minutes=minutes)
        if minutes > 59 or delta > OFFSET_MAX:
            raise ScheduleInvalid("The offset must be from -14:00 to +14:00.", field=field)
        if offset[0] == "-":
            delta = -delta
    try:
        return (local - delta).replace(tzinfo=UTC)
    except OverflowError:
        raise ScheduleInvalid(message, field=field) from None


def cron_parse(raw: Any) -> str:
    """Check a cron expression and return its normal form (single spaces, no leading zeros)."""
    if not isinstance(raw, str) or not raw.strip():
        raise ScheduleInvalid(f"The cron expression is missing: {_ACCEPTED}.", field=_EXPRESSION)
    if len(raw) > CRON_MAX:
        raise ScheduleInvalid(f"The cron expression may have at most {CRON_MAX} characters.", field=_EXPRESSION)
    if raw.strip().startswith("@"):
        macro = MACROS.get(raw.strip().lower())
        if macro is None:
            raise ScheduleInvalid(
                f"The nickname “{raw.strip()[:20]}” is not one cron knows; {_ACCEPTED}.", field=_EXPRESSION
            )
        raw = macro
    fields = raw.split()
    if len(fields) != len(_FIELDS):
        count = f"{len(fields)} field{'' if len(fields) == 1 else 's'}"
        extra = " (seconds are not accepted)" if len(fields) == 6 else ""
        raise ScheduleInvalid(f"The cron expression has {count}{extra}; {_ACCEPTED}.", field=_EXPRESSION)
    return " ".join(_field_parse(text, *spec) for text, spec in zip(fields, _FIELDS, strict=True))


def _named(text: str, name: str) -> str:
    """A field with its month or day names (JAN, MON; any case) as their numbers."""
    names = _NAMES.get(name)
    if names is None:
        return text
    return _NAME.sub(lambda match: names.get(match.group(0).upper(), match.group(0)), text)


def _refuse(message: str) -> ScheduleInvalid:
    return ScheduleInvalid(message[0].upper() + message[1:], field=_EXPRESSION)


def _field_parse(text: str, name: str, low: int, high: int) -> str:
    text = _named(text, name)
    items = []
    for item in text.split(","):
        match = _ITEM.match(item)
        if match is None:
            shown = item[:20]
            if re.search(r"[A-Za-z]", item):
                what = f"is not {_NAMES_SAY[name]}" if name in _NAMES else "has letters"
                raise _refuse(f"the {name} “{shown}” {what}; {_ACCEPTED}.")
            raise _refuse(f"the {name} “{shown}” is not valid; {_ACCEPTED}.")
        star, start, end, step = match.groups()
        if star is not None:
            normal = "*"
            span = high - low + 1
        else:
            first = int(start)
            last = int(end) if end is not None else first
            for value in (first, last):
                if not low <= value <= high:
                    raise _refuse(f"the {name} {value} is outside {low}-{high}.")
            if last < first:
                raise _refuse(f"the {name} range {first}-{last} runs backwards.")
            normal = str(first) if end is None else f"{first}-{last}"
            span = last - first + 1
            if step is not None and end is None:
                raise _refuse(
                    f"the {name} “{item}” has a step on a single number: a step goes on * or a range "
                    f"(*/{int(step)} or {first}-{high}/{int(step)})."
                )
        if step is not None:
            every = int(step)
            if not 1 <= every <= span:
                raise _refuse(f"the step {every} of the {name} must be from 1 to {span}.")
            normal = f"{normal}/{every}"
        items.append(normal)
    return ",".join(items)


@cache
def _zones() -> dict[str, str]:
    return {name.lower(): name for name in zoneinfo.available_timezones()}


def zone_parse(raw: Any) -> str:
    """Check an IANA zone name and return its spelling in the zone database (UTC for its aliases)."""
    field = "schedule.timezone"
    message = "The time zone must be an IANA time zone such as Europe/Berlin or UTC."
    if not isinstance(raw, str) or not raw or len(raw) > 64:
        raise ScheduleInvalid(message, field=field)
    folded = raw.lower()
    if folded in _UTC_NAMES:
        return "UTC"
    name = _zones().get(folded)
    if name is None or name.lower().startswith(("posix/", "right/")) or name == "localtime":
        raise ScheduleInvalid(
            f"The time zone “{raw[:64]}” is not an IANA time zone; give one such as Europe/Berlin or UTC.", field=field
        )
    return name


def zone(name: str) -> zoneinfo.ZoneInfo:
    return zoneinfo.ZoneInfo(name)


def _instant(wall: datetime, tz: zoneinfo.ZoneInfo) -> datetime:
    """The instant of a wall-clock time: the first after a gap, the earlier of a repeated time."""
    while True:
        local = wall.replace(tzinfo=tz, fold=0)
        instant = local.astimezone(UTC)
        if instant.astimezone(tz).replace(tzinfo=None) == wall:
            return instant
        # Skipped by a change of offset: the first whole minute after the gap is where it
        # ends (every offset change of the zone database falls on a whole minute).
        wall = wall.replace(second=0) + timedelta(minutes=1)


def occurrences(schedule: Schedule, *, after: datetime) -> Iterator[datetime]:
    """Yield the schedule's instants strictly after `after`, in order (UTC)."""
    if schedule.kind == "once":
        assert schedule.at is not None
        if schedule.at > after:
            yield schedule.at
        return
    tz = zone(schedule.timezone)
    # Wall-clock times map to instants in order, so the walk starts at `after`'s own wall
    # clock; in a repeated hour's second pass the first times map to earlier instants (the
    # first pass), and are skipped like every instant already yielded.
    last = after
    for wall in CronSim(schedule.expression, after.astimezone(tz).replace(tzinfo=None)):
        instant = _instant(wall, tz)
        if instant <= last:
            continue
        last = instant
        yield instant


def upcoming(schedule: Schedule, *, start: datetime, count: int = UPCOMING) -> list[datetime]:
    """Return the first `count` instants at or after `start`."""
    result = []
    for instant in occurrences(schedule, after=start - timedelta(seconds=1)):
        result.append(instant)
        if len(result) == count:
            break
    return result


def occurrences_between(schedule: Schedule, *, first: datetime, until: datetime) -> tuple[list[datetime], int]:
    """The instants from `first` to `until` (both included): the last two of them, and how many (at most COUNT_MAX)."""
    count = 0
    tail: list[datetime] = []
    for instant in occurrences(schedule, after=first - timedelta(seconds=1)):
        if instant > until:
            break
        count += 1
        tail = [*tail[-1:], instant]
        if count >= COUNT_MAX:
            break
    return tail, count


def cron_check(expression: str) -> None:
    """Refuse an expression whose days no month of it has (cronsim refuses those up front)."""
    try:
        CronSim(expression, datetime(2000, 1, 1))
    except CronSimError:
        raise ScheduleInvalid(_NEVER, field=_EXPRESSION) from None
