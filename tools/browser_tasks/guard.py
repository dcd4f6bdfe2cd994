"""The network side of critical points: what a browser task's page may send while the task acts.

Names lie; requests do not. Every request of a task's context passes `RequestGuard.decide`
(after the network policy), every WebSocket it opens too, and a request is state-changing
when it is any method but GET and HEAD, a form submission (GET ones included), a WebSocket
connection, or a GET whose address reads as a commitment (`critical.address_meaning`:
`/checkout?step=final`, `/api/delete?id=7`) where it navigates a frame, a script sends it
(fetch, XMLHttpRequest, EventSource, a beacon, a prefetch) or it is a hop of a redirect. A
state-changing request is:

- held, while the task acts, when it goes to the page's own site: it is not sent, and the
  runtime asks the owner about everything the action tried to send at once (method, host,
  path and field names; its question also shows the values, masked, from the body kept
  here in memory: `submission.py`); the owner's approval lets exactly those requests
  through (each as often as it was held) when the model repeats the action with that
  critical point's id;
- refused when it goes to another site (the owner is told on the card, the model in its
  step's result), or when no action runs (a timer on a page between steps, a kept context
  waiting for the owner);
- during a sign-in's live view, sent only when it goes to the sign-in page's own site
  within `OWNER_WINDOW` seconds after the owner's own input (a click, a key, text), and
  refused otherwise: a page that sends on a timer while the owner looks on sends nothing.

The page's own site is its host's registrable domain, read without a public-suffix list
(`site_of`): the last two labels, three under the common two-level country suffixes; an
IP address is its own site.

Two layers ask the guard about the same request: the session's own interception of the
page (`interception.py`, first) and Playwright's route of the context (after it, for
pages and frames the first does not reach). An approval spent by the first is not spent
again by the second (`echo`, `again`).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tools.browser_tasks.critical import address_meaning

SAFE_METHODS = frozenset({"GET", "HEAD"})
WEBSOCKET = "WEBSOCKET"  # the method a WebSocket connection is decided and shown under
# What reads its address for words, whatever its method: a frame's navigation and what scripts send
# (resource types as Chromium and Playwright name them, lowercased). Images, scripts and styles are
# not read: shops name their pictures "buy-now.png".
ADDRESS_READ = frozenset({"document", "xhr", "fetch", "eventsource", "ping", "prefetch"})
OWNER_WINDOW = 2.0  # seconds after the owner's own input in a sign-in's live view in which the page may send
CREDITS_MAX = 64
FIELDS_MAX = 40
KEPT_MAX = 20  # requests of one action that are described to the owner
BODY_KEPT = 65_536  # characters of a held request's body kept in memory for its question (never stored whole)
# Second-level labels under which registrations sit one level deeper (example.co.uk).
_MULTIPART_NAME = re.compile(r'content-disposition:[^\r\n]*?\bname="([^"\r\n]*)"', re.IGNORECASE)
_SECOND_LEVEL = frozenset({"co", "com", "net", "org", "gov", "edu", "ac", "or", "ne", "go", "gob", "nic", "mil"})


class Mode(Enum):
    IDLE = "idle"  # no action runs: state-changing requests are refused
    ACTING = "acting"  # an action of the task runs: own site held (or allowed), other sites refused
    OWNER = "owner"  # a sign-in's live view: sent to its site just after the owner's own input


class Decision(Enum):
    SEND = "send"
    HOLD = "hold"
    REFUSE = "refuse"


@dataclass(frozen=True)
class SentRequest:
    """A state-changing request as the owner and the model may see it: never the values it carried.

    A held one also keeps its address, body and content type in memory (never compared,
    printed or stored), from which its question's summary is built (`submission.py`).
    """

    method: str
    host: str
    path: str
    fields: tuple[str, ...]
    form: bool  # a form submission (its method may be GET)
    url: str = field(default="", compare=False, repr=False)
    body: str | None = field(default=None, compare=False, repr=False)
    content_type: str = field(default="", compare=False, repr=False)

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
    if method in SAFE_METHODS or method == WEBSOCKET:
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
    """One task context's rules for state-changing requests; the session's interception layers ask it."""

    mode: Mode = Mode.IDLE
    site: str = ""
    # Signatures the owner approved for this action, each as often as it was held.
    allowed: Counter[str] = field(default_factory=Counter)
    allow_site: bool = False  # the owner approved this very action by its name: its own site may be sent to
    effects: ActionEffects = field(default_factory=ActionEffects)
    # Navigations Chromium reported as form submissions (their URLs), until their request comes.
    form_navigations: set[str] = field(default_factory=set)
    outside_actions: list[SentRequest] = field(default_factory=list)
    clock: Callable[[], float] = time.monotonic
    owner_input_at: float | None = None  # when the owner's last input in a sign-in's live view was applied
    # The address the task opens itself (its start page), let through once whatever it reads as.
    _opening: str | None = None
    # Requests the first layer let through by spending an approval, by (method, URL): the
    # second layer sees them again and lets them through without spending another.
    _credits: Counter[tuple[str, str]] = field(default_factory=Counter)

    def act(self, *, page_url: str, allowed: Iterable[str] = (), allow_site: bool = False) -> None:
        """An action of the task starts on this page, with what the owner approved for it.

        `allowed`: the signatures of held requests the owner approved; `allow_site`: the
        owner approved the action itself (held by its name before it ran), so what it
        sends to the page's own site goes. Other sites are refused either way.
        """
        self.mode = Mode.ACTING
        self.site = _site_of_url(page_url)
        self.allowed = Counter(allowed)
        self.allow_site = allow_site
        self.effects = ActionEffects()
        self._credits.clear()

    def rest(self) -> ActionEffects:
        """The action is over: nothing more is sent for it. Returns what it tried to send."""
        effects, self.effects = self.effects, ActionEffects()
        self.mode, self.allowed, self.allow_site = Mode.IDLE, Counter(), False
        self.owner_input_at = None
        self._credits.clear()
        return effects

    def owner_acts(self, *, page_url: str) -> None:
        """A sign-in's live view opens on this page: its site receives what the owner's own input sends."""
        self.rest()
        self.mode = Mode.OWNER
        self.site = _site_of_url(page_url)

    def owner_input(self) -> None:
        """The owner's input reaches the page now (called as it is applied, and again when it was)."""
        self.owner_input_at = self.clock()

    def opening(self, url: str) -> None:
        """The task opens this address itself (its start page, which the owner started it on)."""
        self._opening = _comparable(url)

    def form_navigation(self, url: str) -> None:
        """Chromium is about to submit a form to this URL (it tells before the request)."""
        if len(self.form_navigations) < 64:
            self.form_navigations.add(url)

    def decide(
        self,
        *,
        method: str,
        url: str,
        post_data: str | None,
        content_type: str,
        navigation: bool,
        resource_type: str = "",
        redirected: bool = False,
        echo: bool = False,
        again: bool = False,
    ) -> Decision:
        """Send, hold or refuse one request (that the network policy already accepted).

        `resource_type` (Chromium's or Playwright's name) and `redirected` (a redirect's hop)
        say whether a GET's address is read for words. `echo`: the second layer will ask
        about this request again; `again`: this is that second ask.
        """
        method = method.upper()
        if again and self._credits[(method, url)] > 0:
            self._credits[(method, url)] -= 1
            return Decision.SEND
        form = navigation and url in self.form_navigations
        self.form_navigations.discard(url)
        if method in SAFE_METHODS and not form:
            if navigation and not redirected and self._opening is not None and _comparable(url) == self._opening:
                self._opening = None
                self._credit(method, url, echo)
                return Decision.SEND
            if not (redirected or resource_type.lower() in ADDRESS_READ) or address_meaning(url) is None:
                return Decision.SEND
        sent = SentRequest(
            method=method,
            host=_host_port(url),
            path=urlsplit(url).path or "/",
            fields=field_names(post_data=post_data, content_type=content_type, url=url, method=method),
            form=form,
        )
        if self.mode is Mode.OWNER:
            if self._owner_caused(url):
                return Decision.SEND
            self._outside(sent)
            return Decision.REFUSE
        if self.mode is Mode.IDLE:
            self._outside(sent)
            return Decision.REFUSE
        if _site_of_url(url) != self.site:
            self.effects.refused.append(sent)
            return Decision.REFUSE
        if self.allow_site:
            return Decision.SEND
        if self.allowed[sent.signature()] > 0:
            self.allowed[sent.signature()] -= 1
            self._credit(method, url, echo)
            return Decision.SEND
        if len(self.effects.held) < KEPT_MAX:
            body = post_data[:BODY_KEPT] if post_data else None
            self.effects.held.append(replace(sent, url=url, body=body, content_type=content_type))
        return Decision.HOLD

    def socket_sends(self, url: str) -> bool:
        """Whether a message the page writes to an open WebSocket to `url` goes out now."""
        if self.mode is Mode.ACTING:
            return _site_of_url(url) == self.site
        if self.mode is Mode.OWNER and self._owner_caused(url):
            return True
        self._outside(
            SentRequest(method=WEBSOCKET, host=_host_port(url), path=urlsplit(url).path or "/", fields=(), form=False)
        )
        return False

    def outside_taken(self) -> list[SentRequest]:
        """The state-changing requests the page tried while no action ran (then forgotten)."""
        taken, self.outside_actions = self.outside_actions, []
        return taken

    def _owner_caused(self, url: str) -> bool:
        """Sent to the sign-in's own site within the window after the owner's own input."""
        if self.owner_input_at is None or _site_of_url(url) != self.site:
            return False
        return 0 <= self.clock() - self.owner_input_at <= OWNER_WINDOW

    def _outside(self, sent: SentRequest) -> None:
        if len(self.outside_actions) < KEPT_MAX and sent not in self.outside_actions:
            self.outside_actions.append(sent)

    def _credit(self, method: str, url: str, echo: bool) -> None:
        if echo and sum(self._credits.values()) < CREDITS_MAX:
            self._credits[(method, url)] += 1


def _site_of_url(url: str) -> str:
    return site_of(urlsplit(url).hostname or "")


def _comparable(url: str) -> str:
    """A URL as Chromium requests it, near enough to recognise the start page: no fragment, a path."""
    parts = urlsplit(url)
    return parts._replace(
        scheme=parts.scheme.lower(), netloc=parts.netloc.lower(), path=parts.path or "/", fragment=""
    ).geturl()
