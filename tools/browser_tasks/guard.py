"""The network side of critical points: what a browser task's page may send while the task acts.

Names lie; requests do not. Every request of a task's context passes `RequestGuard.decide`
(after the network policy) and a request that changes state (any method but GET and HEAD,
and any form submission, GET ones included) is:

- held, while the task acts, when it goes to the page's own site: it is not sent, and the
  runtime asks the owner about everything the action tried to send at once (method, host,
  path and field names, never values); the owner's approval lets exactly those requests
  through (each as often as it was held) when the model repeats the action with that
  critical point's id;
- refused when it goes to another site (the owner is told on the card, the model in its
  step's result), or when no action runs (a timer on a page between steps, a kept context
  waiting for the owner);
- sent only while the owner acts through the live view of a sign-in.

The page's own site is its host's registrable domain, read without a public-suffix list
(`site_of`): the last two labels, three under the common two-level country suffixes.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from urllib.parse import parse_qsl, urlsplit

SAFE_METHODS = frozenset({"GET", "HEAD"})
FIELDS_MAX = 40
KEPT_MAX = 20  # requests of one action that are described to the owner
# Second-level labels under which registrations sit one level deeper (example.co.uk).
_MULTIPART_NAME = re.compile(r'content-disposition:[^\r\n]*?\bname="([^"\r\n]*)"', re.IGNORECASE)
_SECOND_LEVEL = frozenset({"co", "com", "net", "org", "gov", "edu", "ac", "or", "ne", "go", "gob", "nic", "mil"})


class Mode(Enum):
    IDLE = "idle"  # no action runs: state-changing requests are refused
    ACTING = "acting"  # an action of the task runs: own site held (or allowed), other sites refused
    OWNER = "owner"  # the owner acts through a sign-in's live view: sent


class Decision(Enum):
    SEND = "send"
    HOLD = "hold"
    REFUSE = "refuse"


@dataclass(frozen=True)
class SentRequest:
    """A state-changing request as the owner may see it: never the values it carried."""

    method: str
    host: str
    path: str
    fields: tuple[str, ...]
    form: bool  # a form submission (its method may be GET)

    def as_dict(self) -> dict[str, object]:
        return {"method": self.method, "host": self.host, "path": self.path, "fields": list(self.fields)}

    def signature(self) -> str:
        return request_signature(self.as_dict())

    def described(self) -> str:
        fields = f" (fields: {', '.join(self.fields)})" if self.fields else ""
        return f"{self.method} {self.host}{self.path}{fields}"


def request_signature(request: Mapping[str, Any]) -> str:
    """What an approval names of a request: method, host, path and the set of field names."""
    fields = sorted({str(name) for name in request.get("fields", [])})
    return json.dumps([str(request["method"]), str(request["host"]), str(request["path"]), fields])


def site_of(host: str) -> str:
    """The registrable domain of a host, approximately (an IP address is its own site)."""
    host = host.lower().rstrip(".")
    labels = host.split(".")
    if host.replace(".", "").isdigit() or ":" in host or len(labels) <= 2:
        return host
    keep = 3 if len(labels[-1]) == 2 and labels[-2] in _SECOND_LEVEL else 2
    return ".".join(labels[-keep:])


def _host_port(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{host}:{parts.port}" if parts.port else host


def field_names(*, post_data: str | None, content_type: str, url: str, method: str) -> tuple[str, ...]:
    """The names of the fields a request carried (form, JSON object or query), never their values."""
    names: list[str] = []
    kind = content_type.split(";", 1)[0].strip().lower()
    if method in SAFE_METHODS:
        names = [name for name, _ in parse_qsl(urlsplit(url).query, keep_blank_values=True)]
    elif post_data and kind == "application/x-www-form-urlencoded":
        names = [name for name, _ in parse_qsl(post_data, keep_blank_values=True)]
    elif post_data and kind == "application/json":
        try:
            parsed = json.loads(post_data)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            names = [str(key) for key in parsed]
    elif post_data and kind == "multipart/form-data":
        names = _MULTIPART_NAME.findall(post_data)
    cleaned = [" ".join(name.split())[:60] for name in names]
    return tuple(dict.fromkeys(name for name in cleaned if name))[:FIELDS_MAX]


@dataclass
class ActionEffects:
    """What one action tried to send and was not let through."""

    held: list[SentRequest] = field(default_factory=list)
    refused: list[SentRequest] = field(default_factory=list)


@dataclass
class RequestGuard:
    """One task context's rules for state-changing requests; the session's route handler asks it."""

    mode: Mode = Mode.IDLE
    site: str = ""
    # Signatures the owner approved for this action, each as often as it was held.
    allowed: Counter[str] = field(default_factory=Counter)
    allow_site: bool = False  # the owner approved this very action by its name: its own site may be sent to
    effects: ActionEffects = field(default_factory=ActionEffects)
    # Navigations Chromium reported as form submissions (their URLs), until their request comes.
    form_navigations: set[str] = field(default_factory=set)
    outside_actions: list[SentRequest] = field(default_factory=list)

    def act(self, *, page_url: str, allowed: Iterable[str] = (), allow_site: bool = False) -> None:
        """An action of the task starts on this page, with what the owner approved for it.

        `allowed`: the signatures of held requests the owner approved; `allow_site`: the
        owner approved the action itself (held by its name before it ran), so what it
        sends to the page's own site goes. Other sites are refused either way.
        """
        self.mode = Mode.ACTING
        self.site = site_of(urlsplit(page_url).hostname or "")
        self.allowed = Counter(allowed)
        self.allow_site = allow_site
        self.effects = ActionEffects()

    def rest(self) -> ActionEffects:
        """The action is over: nothing more is sent for it. Returns what it tried to send."""
        effects, self.effects = self.effects, ActionEffects()
        self.mode, self.allowed, self.allow_site = Mode.IDLE, Counter(), False
        return effects

    def owner_acts(self) -> None:
        self.mode = Mode.OWNER

    def form_navigation(self, url: str) -> None:
        """Chromium is about to submit a form to this URL (it tells before the request)."""
        if len(self.form_navigations) < 64:
            self.form_navigations.add(url)

    def decide(self, *, method: str, url: str, post_data: str | None, content_type: str, navigation: bool) -> Decision:
        """Send, hold or refuse one request (that the network policy already accepted)."""
        method = method.upper()
        form = navigation and url in self.form_navigations
        self.form_navigations.discard(url)
        if method in SAFE_METHODS and not form:
            return Decision.SEND
        if self.mode is Mode.OWNER:
            return Decision.SEND
        sent = SentRequest(
            method=method,
            host=_host_port(url),
            path=urlsplit(url).path or "/",
            fields=field_names(post_data=post_data, content_type=content_type, url=url, method=method),
            form=form,
        )
        if self.mode is Mode.IDLE:
            if len(self.outside_actions) < KEPT_MAX:
                self.outside_actions.append(sent)
            return Decision.REFUSE
        if site_of(urlsplit(url).hostname or "") != self.site:
            self.effects.refused.append(sent)
            return Decision.REFUSE
        if self.allow_site:
            return Decision.SEND
        if self.allowed[sent.signature()] > 0:
            self.allowed[sent.signature()] -= 1
            return Decision.SEND
        if len(self.effects.held) < KEPT_MAX:
            self.effects.held.append(sent)
        return Decision.HOLD

    def outside_taken(self) -> list[SentRequest]:
        """The state-changing requests the page tried while no action ran (then forgotten)."""
        taken, self.outside_actions = self.outside_actions, []
        return taken
