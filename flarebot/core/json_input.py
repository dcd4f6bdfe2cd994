"""JSON from clients: what `json.loads` accepts, or fails on, that Flarebot refuses as invalid.

Request bodies (through the DRF parser in `flarebot.core.api`) and socket frames both
parse through `json_parse`, so a value no later check would expect never gets past
parsing: nesting deep enough to exhaust the parser's recursion (a RecursionError, not a
ValueError), a lone surrogate (`"\\ud800"`: no UTF-8, so no database, takes it), or the
non-JSON constants NaN and Infinity.
"""

from __future__ import annotations

import json
from typing import Any

from flarebot.core.text import has_lone_surrogates


class JsonRefused(ValueError):
    """The text is not JSON that Flarebot accepts."""


def _refuse_constant(name: str) -> Any:
    raise JsonRefused(f"{name} is not JSON")


def json_parse(text: str) -> Any:
    """Parse a client's JSON text, or raise JsonRefused."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise JsonRefused("nested too deeply") from None
    except ValueError as error:
        raise JsonRefused(str(error)) from None
    # Walked with a stack, not recursion: the value may be nested nearly as deep as the
    # parser allows.
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if has_lone_surrogates(item):
                raise JsonRefused("a string holds a lone surrogate")
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return value
