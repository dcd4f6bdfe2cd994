"""The one shape of an id a client sends: a UUID in canonical form.

Every place that reads an id from a path, a body or a frame parses it here, then refuses
what does not parse in its own words (its code and message are part of its contract).
`uuid.UUID` alone also takes "urn:uuid:", braces and stray hyphens; none of those is an
id. Some interfaces take an id in any case, others only in lowercase: the parameter says
which, so the difference stays where each interface is declared.
"""

from __future__ import annotations

import uuid


def uuid_parse(value: object, *, lowercase: bool = False) -> uuid.UUID | None:
    """Return the UUID that `value` spells in canonical form (only lowercase if `lowercase`), or None."""
    if not isinstance(value, str):
        return None
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        return None
    return parsed if str(parsed) == (value if lowercase else value.lower()) else None
