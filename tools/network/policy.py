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

Failures are `Refused` with a classified, safe message (no URL, no address) that names the
rule that refused it (`rule`: `loopback`, `private`, `link_local`, `ip_literal`, `port`,
`scheme`, ...; `REFUSAL_RULES`). When the operator's allowlist could let exactly that host
and port through, `entry` is the allowlist entry that would (`operator_hint` words it for
the owner's card; it never goes to the model, which must not talk anyone into widening
the policy). Cloud metadata addresses get no entry: no operator should allow them.
"""

from __future__ import annotations

import ipaddress
import unicodedata
from dataclasses import dataclass

from django.conf import settings
from yarl import URL

from flarebot.core.env import host_port_problem

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


# The rules an address breaks, and how a message names each.
ADDRESS_RULES = {
    "metadata": "a cloud metadata address",
    "unspecified": "an unspecified address",
    "loopback": "a loopback address",
    "private": "a private address",
    "cgnat": "a shared (CGNAT) address",
    "link_local": "a link-local address",
    "reserved": "a reserved address",
    "documentation": "a documentation address",
    "benchmark": "a benchmark address",
    "multicast": "a multicast address",
    "not_public": "not a public address",
    "malformed_address": "an address that is not plain IP (scoped or malformed)",
}
# Every rule a refusal names (`Refused.rule`): the URL's own, then the addresses'.
REFUSAL_RULES = frozenset(
    {
        "invalid_url",  # unparseable, too long, ambiguous characters
        "scheme",  # not http or https
        "credentials",  # user@host
        "port",  # port 0, or a host the allowlist names with another port only
        "ip_literal",  # a public IP address instead of a name
        "other_spelling",  # an allowlisted address spelled another way
        "local_name",  # localhost, *.internal, single labels, ...
        "unresolved",  # the name does not resolve
        "browser_service",  # Chromium's own calls home
        *ADDRESS_RULES,
    }
)
_NEVER_ALLOW = frozenset({"metadata"})  # no hint offers these to the allowlist


def _networks(*entries: tuple[str, str]) -> list[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str]]:
    return [(ipaddress.ip_network(network), rule) for network, rule in entries]


# Checked in order: the first match names the rule. Metadata first, as it sits inside
# wider ranges (link-local, CGNAT, unique local) and is the rule worth naming.
_REFUSED_V4 = _networks(
    ("169.254.169.254/32", "metadata"),
    ("169.254.170.2/32", "metadata"),
    ("100.100.100.200/32", "metadata"),
    ("168.63.129.16/32", "metadata"),
    ("192.0.0.192/32", "metadata"),
    ("0.0.0.0/8", "unspecified"),
    ("127.0.0.0/8", "loopback"),
    ("10.0.0.0/8", "private"),
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    ("100.64.0.0/10", "cgnat"),
    ("169.254.0.0/16", "link_local"),
    ("192.0.0.0/24", "reserved"),
    ("192.0.2.0/24", "documentation"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("198.18.0.0/15", "benchmark"),
    ("192.88.99.0/24", "reserved"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
)
_REFUSED_V6 = _networks(
    ("fd00:ec2::254/128", "metadata"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::/96", "reserved"),  # IPv4-compatible, deprecated
    ("64:ff9b:1::/48", "reserved"),  # local-use NAT64
    ("100::/64", "reserved"),  # discard-only
    ("2001::/32", "reserved"),  # Teredo: embeds another host's address
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("fc00::/7", "private"),
    ("fe80::/10", "link_local"),
    ("fec0::/10", "private"),  # site-local, deprecated
    ("ff00::/8", "multicast"),
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class Refused(Exception):
    """The network policy refuses a URL or an address; `message` is safe to show, to the model too.

    `code` is the check that refused it, `rule` the rule it broke (`REFUSAL_RULES`; the
    code when the check has one rule), `entry` the `FLAREBOT_NETWORK_ALLOW` entry that
    would allow exactly this host and port (None when the allowlist cannot, or must not),
    and `redirect` whether it was where a page sent the request rather than the URL given.
    """

    def __init__(
        self, code: str, message: str, *, rule: str | None = None, entry: str | None = None, redirect: bool = False
    ) -> None:
        self.code = code
        self.message = message
        self.rule = rule or code
        self.entry = entry if self.rule not in _NEVER_ALLOW else None
        self.redirect = redirect
        super().__init__(message)

    def redirected(self, prefix: str) -> Refused:
        """The same refusal, of a URL a page redirected to, its message after `prefix`."""
        return Refused(self.code, f"{prefix}{self.message}", rule=self.rule, entry=self.entry, redirect=True)


def operator_hint(refused: Refused) -> str | None:
    """What the owner's card says an operator can do about a refusal; never sent to the model."""
    if refused.entry is None:
        return None
    return (
        f"An operator can allow exactly this host and port with FLAREBOT_NETWORK_ALLOW={refused.entry} "
        "(added to the entries already there, comma-separated) and a restart of Flarebot. "
        "Allow only a service that is safe to read."
    )


@dataclass(frozen=True)
class Target:
    """A URL the policy accepted (before resolution): what to connect to and how."""

    url: URL  # parsed by yarl, fragment dropped; what the request is made with
    host: str  # as connected and resolved: IDNA ASCII, an IPv6 address without brackets
    port: int
    allowed: bool  # an exact entry of the operator's allowlist: no host or address checks
    literal: bool  # the host is an IP address (only ever true when allowed)
    # The allowlist entry that would allow this URL's host and port as written (None when
    # no entry can spell it: a Unicode name, say); offered to the owner when refused.
    entry: str | None = None

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
        raise Refused("invalid_url", "Port 0 cannot be reached.", rule="port")
    allowed = (raw_host.lower(), url.port) in settings.CONFIG.network_allow
    if port_text and url.explicit_port is None:
        raise Refused("invalid_url", "The URL's port cannot be parsed.")
    host = url.raw_host
    literal = _is_literal(raw_host) or _is_literal(host)
    entry = allow_entry(raw_host, url.port)
    if not allowed:
        if literal:
            _literal_refuse(raw_host, url.port, entry)
        problem = host_refusal(host)
        if problem is not None:
            on_port = port_refusal(raw_host, url.port)
            raise Refused("local_name", on_port or problem, rule="port" if on_port else "local_name", entry=entry)
    return Target(url=url.with_fragment(None), host=host, port=url.port, allowed=allowed, literal=literal, entry=entry)


def allow_entry(raw_host: str, port: int) -> str | None:
    """The allowlist entry of a host (as the URL spells it) and port, if an entry can spell it."""
    host = raw_host.lower()
    return None if host_port_problem(host, str(port)) else f"{host}:{port}"


def port_refusal(raw_host: str, port: int) -> str | None:
    """Why a host the allowlist names with other ports only is refused on this one, else None."""
    host = raw_host.lower()
    if not any(entry_host == host for entry_host, _ in settings.CONFIG.network_allow):
        return None
    return f"The operator allows this host on another port only; port {port} is not allowed."


def _literal_refuse(raw_host: str, port: int, entry: str | None) -> None:
    """Refuse an IP literal the allowlist does not name, by the rule its address breaks."""
    address = _url_parser_address(raw_host)
    if (address, port) in settings.CONFIG.network_allow:
        raise Refused("ip_literal", OTHER_SPELLING, rule="other_spelling")
    rule = address_rule(address.strip("[]")) if address is not None else None
    if rule is None:
        on_port = port_refusal(raw_host, port)
        message = on_port or "URLs naming an IP address are refused; use a host name."
        raise Refused("ip_literal", message, rule="port" if on_port else "ip_literal", entry=entry)
    said = f"The URL names {ADDRESS_RULES[rule]}, which Flarebot may not reach."
    on_port = port_refusal(raw_host, port)
    if on_port is not None:
        raise Refused("ip_literal", f"{on_port} {said}", rule="port", entry=entry)
    raise Refused("ip_literal", said, rule=rule, entry=entry)


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
    rule = address_rule(address)
    return None if rule is None else ADDRESS_RULES[rule]


def address_rule(address: str) -> str | None:
    """Return the rule an address breaks ("loopback", "private", ...; `ADDRESS_RULES`), or None if public."""
    try:
        ip: Address = ipaddress.ip_address(address)
    except ValueError:
        return "malformed_address"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_v4(ip)
        if embedded is not None:
            return _v4_rule(embedded)
        for network, rule in _REFUSED_V6:
            if ip in network:
                return rule
        return None if ip.is_global else "not_public"
    return _v4_rule(ip)


def _v4_rule(ip: ipaddress.IPv4Address) -> str | None:
    for network, rule in _REFUSED_V4:
        if ip in network:
            return rule
    return None if ip.is_global else "not_public"


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (mapped, 6to4, NAT64), checked as IPv4."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None
