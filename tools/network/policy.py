"""What the web tools may reach: URLs checked before parsing, hosts and addresses after.

The rules, each in one place here:

- `url_check`: http and https only, at most `URL_MAX` characters, no credentials, no IP
  literal in any spelling, no local names (`localhost`, `*.internal`, single labels, ...).
  Input that the URL parser (yarl, also aiohttp's) and another reader could take apart
  differently is refused before parsing: backslashes, whitespace and control characters,
  `@` or `%` in the authority.
- `address_refusal`: every address a name resolves to must be public: loopback, private,
  link-local, CGNAT, unspecified, multicast, reserved, benchmark, documentation and cloud
  metadata addresses are refused, and so are IPv6 forms that embed a refused IPv4 one.
- The operator's allowlist (`FLAREBOT_NETWORK_ALLOW`): exact `host:port` entries, matched
  against the host as the URL spells it, that skip the host and address checks. Nothing
  else does. Another spelling of an allowlisted address (`127.1`, `2130706433`, `0x7f.1`
  for `127.0.0.1`) is refused with a message that says so. A URL that Chromium parsed
  first (a page's redirect, link or subresource, seen by the browser proxy and the
  browser tools' routes) already has its numeric host in the dotted form: there the
  original spelling is gone, and an allowlisted address is matched however the page
  wrote it. The URLs the agent gives are checked here before Chromium sees them.

Failures are `Refused` with a classified, safe message (no URL, no address).
"""

from __future__ import annotations

import ipaddress
import unicodedata
from dataclasses import dataclass

from django.conf import settings
from yarl import URL

URL_MAX = 2048
HOST_MAX = 253
LABEL_MAX = 63

# Local names: never public, whatever a resolver says about them.
_LOCAL_NAMES = {"localhost"}
_LOCAL_SUFFIXES = (
    ".localhost",
    ".internal",
    ".local",
    ".localdomain",
    ".lan",
    ".home",
    ".arpa",  # home.arpa, in-addr.arpa, ip6.arpa
    ".intranet",
    ".corp",
    ".private",
    ".onion",
    ".invalid",
    ".test",
)
# Dots that IDNA maps to "." (ideographic and fullwidth full stops).
_DOT_VARIANTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})
_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

OTHER_SPELLING = (
    "This address is allowed only as the operator's allowlist spells it (dotted decimal, or "
    "the shortest IPv6 form); other spellings of it are refused."
)


def _networks(*entries: tuple[str, str]) -> list[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str]]:
    return [(ipaddress.ip_network(network), reason) for network, reason in entries]


_METADATA = "a cloud metadata address"
# Checked in order: the first match names the reason. Metadata first, as it sits inside
# wider ranges (link-local, CGNAT, unique local) and is the reason worth naming.
_REFUSED_V4 = _networks(
    ("169.254.169.254/32", _METADATA),
    ("169.254.170.2/32", _METADATA),
    ("100.100.100.200/32", _METADATA),
    ("168.63.129.16/32", _METADATA),
    ("192.0.0.192/32", _METADATA),
    ("0.0.0.0/8", "an unspecified address"),
    ("127.0.0.0/8", "a loopback address"),
    ("10.0.0.0/8", "a private address"),
    ("172.16.0.0/12", "a private address"),
    ("192.168.0.0/16", "a private address"),
    ("100.64.0.0/10", "a shared (CGNAT) address"),
    ("169.254.0.0/16", "a link-local address"),
    ("192.0.0.0/24", "a reserved address"),
    ("192.0.2.0/24", "a documentation address"),
    ("198.51.100.0/24", "a documentation address"),
    ("203.0.113.0/24", "a documentation address"),
    ("198.18.0.0/15", "a benchmark address"),
    ("192.88.99.0/24", "a reserved address"),
    ("224.0.0.0/4", "a multicast address"),
    ("240.0.0.0/4", "a reserved address"),
)
_REFUSED_V6 = _networks(
    ("fd00:ec2::254/128", _METADATA),
    ("::/128", "an unspecified address"),
    ("::1/128", "a loopback address"),
    ("::/96", "a reserved address"),  # IPv4-compatible, deprecated
    ("64:ff9b:1::/48", "a reserved address"),  # local-use NAT64
    ("100::/64", "a reserved address"),  # discard-only
    ("2001::/32", "a reserved address"),  # Teredo: embeds another host's address
    ("2001:db8::/32", "a documentation address"),
    ("3fff::/20", "a documentation address"),
    ("fc00::/7", "a private address"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a private address"),  # site-local, deprecated
    ("ff00::/8", "a multicast address"),
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class Refused(Exception):
    """The network policy refuses a URL or an address; `message` is safe to show."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(message)


@dataclass(frozen=True)
class Target:
    """A URL the policy accepted (before resolution): what to connect to and how."""

    url: URL  # parsed by yarl, fragment dropped; what the request is made with
    host: str  # as connected and resolved: IDNA ASCII, an IPv6 address without brackets
    port: int
    allowed: bool  # an exact entry of the operator's allowlist: no host or address checks
    literal: bool  # the host is an IP address (only ever true when allowed)

    @property
    def secure(self) -> bool:
        return self.url.scheme == "https"


def url_check(raw: object) -> Target:
    """Return the target of a URL the policy accepts, or raise Refused saying why not."""
    if not isinstance(raw, str) or not raw:
        raise Refused("invalid_url", "The URL is empty or not text.")
    if len(raw) > URL_MAX:
        raise Refused("invalid_url", f"The URL is longer than {URL_MAX} characters.")
    if any(ch.isspace() or not ch.isprintable() or ch == "\\" for ch in raw):
        raise Refused("invalid_url", "The URL holds spaces, control characters or backslashes.")
    scheme, sep, rest = raw.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise Refused("scheme", "Only http and https URLs can be read.")
    authority = _authority_of(rest)
    if "@" in authority:
        raise Refused("credentials", "URLs with credentials (user@host) are refused.")
    if "%" in authority:
        raise Refused("invalid_url", "Percent-encoding in the host is refused.")
    raw_host, port_text = _split_authority(authority)
    if not raw_host:
        raise Refused("invalid_url", "The URL has no host.")
    try:
        url = URL(raw)
    except (ValueError, UnicodeError):
        raise Refused("invalid_url", "The URL cannot be parsed.") from None
    if url.scheme not in ("http", "https") or not url.raw_host or url.port is None:
        raise Refused("invalid_url", "The URL cannot be parsed.")
    if url.port == 0:
        raise Refused("invalid_url", "Port 0 cannot be reached.")
    allowed = (raw_host.lower(), url.port) in settings.CONFIG.network_allow
    if port_text and url.explicit_port is None:
        raise Refused("invalid_url", "The URL's port cannot be parsed.")
    host = url.raw_host
    literal = _is_literal(raw_host) or _is_literal(host)
    if not allowed:
        if literal and (_url_parser_address(raw_host), url.port) in settings.CONFIG.network_allow:
            raise Refused("ip_literal", OTHER_SPELLING)
        if literal:
            raise Refused("ip_literal", "URLs naming an IP address are refused; use a host name.")
        problem = host_refusal(host)
        if problem is not None:
            raise Refused("local_name", problem)
    return Target(url=url.with_fragment(None), host=host, port=url.port, allowed=allowed, literal=literal)


def _authority_of(rest: str) -> str:
    for index, ch in enumerate(rest):
        if ch in "/?#":
            return rest[:index]
    return rest


def _split_authority(authority: str) -> tuple[str, str]:
    """Split `host[:port]` as written; a bracketed IPv6 host keeps its brackets."""
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            return authority, ""
        return authority[: end + 1], authority[end + 2 :]
    host, _, port = authority.partition(":")
    return host, port


def _is_literal(host: str) -> bool:
    """Whether a host is an IP address in any spelling a resolver or browser might accept.

    Bracketed or colon-holding hosts are IPv6; otherwise, as the WHATWG URL standard
    decides, a host whose last label is a number (decimal, octal, `0x` hex, in any
    script's digits) is IPv4: `127.1`, `2130706433`, `0x7f.1`, `017700000001`.
    """
    normal = unicodedata.normalize("NFKC", host).translate(_DOT_VARIANTS).lower()
    if normal.startswith("[") or ":" in normal:
        return True
    stripped = normal.rstrip(".")
    if not stripped:
        return False
    try:
        ipaddress.ip_address(stripped)
    except ValueError:
        pass
    else:
        return True
    last = stripped.rpartition(".")[2]
    if last and all(ch.isdigit() or unicodedata.category(ch) == "Nd" for ch in last):
        return True
    return last.startswith("0x") and all(ch in "0123456789abcdef" for ch in last[2:])


def _url_parser_address(host: str) -> str | None:
    """Return the address a browser's URL parser reads host as (`127.0.0.1`, `[::1]`), or None for a name.

    The WHATWG URL standard's IPv4 parser: one to four dot-separated numbers, each
    decimal, octal (a leading 0) or hex (`0x`), the last filling the remaining bytes.
    """
    normal = unicodedata.normalize("NFKC", host).translate(_DOT_VARIANTS).lower()
    if normal.startswith("[") and normal.endswith("]"):
        try:
            return f"[{ipaddress.IPv6Address(normal[1:-1]).compressed}]"
        except ValueError:
            return None
    parts = normal.split(".")
    if len(parts) > 1 and not parts[-1]:
        parts.pop()
    numbers = [_url_parser_number(part) for part in parts]
    if not 1 <= len(numbers) <= 4 or any(number is None for number in numbers):
        return None
    *leading, last = [number for number in numbers if number is not None]
    if any(number > 255 for number in leading) or last >= 256 ** (4 - len(leading)):
        return None
    value = last + sum(number << (8 * (3 - index)) for index, number in enumerate(leading))
    return str(ipaddress.IPv4Address(value))


def _url_parser_number(part: str) -> int | None:
    """One part of a WHATWG IPv4 host as a number, or None if it is no number."""
    digits, radix = part, 10
    if part.startswith("0x"):
        digits, radix = part[2:], 16
    elif len(part) > 1 and part.startswith("0"):
        digits, radix = part[1:], 8
    if not digits:
        return 0 if part else None
    if not digits.isascii() or any(ch not in "0123456789abcdef"[:radix] for ch in digits):
        return None
    return int(digits, radix)


def host_refusal(host: str) -> str | None:
    """Return why a (non-literal, IDNA ASCII) host name is refused, or None."""
    name = host.lower().rstrip(".")
    if len(name) > HOST_MAX or any(ch not in _NAME_CHARACTERS for ch in name):
        return "The host name is not a valid public name."
    labels = name.split(".")
    if any(not label or len(label) > LABEL_MAX for label in labels):
        return "The host name is not a valid public name."
    if len(labels) < 2:
        return "Single-label host names are local; use a full public name."
    if name in _LOCAL_NAMES or name.endswith(_LOCAL_SUFFIXES):
        return "Local host names (such as localhost or *.internal) are refused."
    return None


def address_refusal(address: str) -> str | None:
    """Return why a resolved address is refused ("a private address", ...), or None if public."""
    try:
        ip: Address = ipaddress.ip_address(address)
    except ValueError:
        return "an address that is not plain IP (scoped or malformed)"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_v4(ip)
        if embedded is not None:
            return _v4_refusal(embedded)
        for network, reason in _REFUSED_V6:
            if ip in network:
                return reason
        return None if ip.is_global else "not a public address"
    return _v4_refusal(ip)


def _v4_refusal(ip: ipaddress.IPv4Address) -> str | None:
    for network, reason in _REFUSED_V4:
        if ip in network:
            return reason
    return None if ip.is_global else "not a public address"


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (mapped, 6to4, NAT64), checked as IPv4."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None
