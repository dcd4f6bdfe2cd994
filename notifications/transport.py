"""The one door to Apprise: whether it can parse a URL, how a URL is shown, and a bounded send.

A destination's URL is the owner's own choice (set only through the owner's API, never by a
tool or the model), so a message goes straight to it, outside the tools' network policy,
with a time bound on the whole call. Nothing here logs, raises or returns the URL or what
a receiver answered: failures become `TransportError` with a fixed, safe sentence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from flarebot.core.crypto import Secret

if TYPE_CHECKING:
    import apprise

# Seconds to connect to and to read from a destination, and for the whole send.
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 10.0
SEND_BOUND = 20.0


class TransportError(Exception):
    """A message was not accepted; `permanent` when trying again cannot help."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent


@dataclass(frozen=True)
class Message:
    title: str
    body: str


def _plugin(url: str) -> apprise.NotifyBase | None:
    import apprise  # loads on first use: most processes never send or check a destination

    try:
        plugin = apprise.Apprise.instantiate(url, asset=apprise.AppriseAsset(storage_mode="memory"))
    except Exception:
        return None
    return plugin if isinstance(plugin, apprise.NotifyBase) else None


def url_parses(url: str) -> bool:
    """Whether Apprise knows this URL's service and can parse it."""
    return _plugin(url) is not None


def url_masked(url: str) -> str:
    """How a destination is shown: its service's scheme only, never a host, path or token."""
    scheme = urlsplit(url).scheme.lower()[:16] or "?"
    return f"{scheme}://••••••"


def message_send(*, url: Secret, message: Message) -> None:
    """Send one message to a destination within SEND_BOUND seconds, or raise TransportError."""
    import apprise  # loads on first use: most processes never send or check a destination

    plugin = _plugin(url.reveal())
    if plugin is None:
        raise TransportError("Apprise can no longer read this destination's URL; add it again.", permanent=True)
    plugin.socket_connect_timeout = CONNECT_TIMEOUT
    plugin.socket_read_timeout = READ_TIMEOUT
    sender = apprise.Apprise(asset=apprise.AppriseAsset(storage_mode="memory"))
    sender.add(plugin)
    try:
        result = sender.notify(body=message.body, title=message.title, timeout=SEND_BOUND)
    except Exception:
        raise TransportError("The message could not be handed to the destination.") from None
    if result.status == apprise.AppriseResultStatus.TIMEOUT:
        raise TransportError(f"The destination did not answer within {SEND_BOUND:.0f} seconds.")
    if not result:
        raise TransportError("The destination did not accept the message (refused, or could not be reached).")
