"""Source records: what a web tool read or found, kept in its output for citations.

A source carries a stable id derived from its final URL, its title, the URL asked for and
the URL it came from in the end, when it was fetched, its kind (`search`, `page`,
`browser`), its content (empty for search results: the search API gives no excerpts) and
whether that content was cut. The chat page lists a turn's sources from these records.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any, Literal, TypedDict

from django.utils import timezone

from flarebot.core.times import iso
from tools.kit import card_summary, count_of, refusal
from tools.network.policy import URL_MAX, Refused, operator_hint, url_check
from tools.registry import ToolContext

SourceKind = Literal["search", "page", "browser"]


class SourceJson(TypedDict):
    id: str
    kind: SourceKind
    title: str
    requested_url: str
    final_url: str
    fetched_at: str
    content: str
    truncated: bool


def source_id(url: str) -> str:
    """Return the stable id of a source: a hash of its final URL."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]


def source_record(
    *,
    kind: SourceKind,
    title: str,
    requested_url: str,
    final_url: str,
    content: str = "",
    truncated: bool = False,
    fetched_at: datetime | None = None,
) -> SourceJson:
    return {
        "id": source_id(final_url),
        "kind": kind,
        "title": title,
        "requested_url": requested_url,
        "final_url": final_url,
        "fetched_at": iso(fetched_at or timezone.now()) or "",
        "content": content,
        "truncated": truncated,
    }


def url_property(verb: str) -> dict[str, Any]:
    """Return the input schema of the URL a web tool is given to `verb` ("read", "render")."""
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": URL_MAX,
        "description": f"The exact http(s) URL to {verb} (a public host name, not an IP address).",
    }


def url_refused(context: ToolContext, refused: Refused, *, prefix: str = "") -> dict[str, Any]:
    """Return the failure of a URL the network policy refused, naming its rule.

    The model gets the rule and the message; what an operator could allow goes to the
    owner's card alone (`ToolContext.hint_owner`).
    """
    hint = operator_hint(refused)
    if hint is not None:
        context.hint_owner(hint)
    return refusal("refused", prefix + refused.message, rule=refused.rule, redirect=refused.redirect)


def citable_url(raw: object) -> str | None:
    """Return a URL fit to cite or follow (it passes the policy's URL rules), normalised; else None."""
    try:
        target = url_check(raw)
    except Refused:
        return None
    return str(target.url)


def _sources_summary(output: dict[str, Any]) -> str:
    sources = output.get("sources") or []
    if output.get("kind") == "search":
        return count_of(len(sources), "source")
    hosts = [host_of(source.get("final_url", "")) for source in sources if isinstance(source, dict)]
    return ", ".join(host for host in hosts if host)


# The card summary of a web tool's result: its failure message, or its sources' hosts (never URLs).
summary_of = card_summary(_sources_summary)


def host_of(url: str) -> str:
    target_host = url.partition("://")[2].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    return target_host.rsplit("@", 1)[-1]
