# ruff: noqa: RUF001 (the look-alike characters are the point of these tables)
"""The network policy as a table: hostile URLs, resolver answers, and the operator's allowlist.

The spellings of loopback and private addresses come from public SSRF bypass lists
(PayloadsAllTheThings' "Server Side Request Forgery", HackTricks' "URL format bypass",
OWASP's SSRF prevention cheat sheet): each must be refused before any lookup.
"""

from __future__ import annotations

import dataclasses

import pytest

from flarebot.core import env
from tests.support.fake_dns import FakeDns
from tools.network.policy import OTHER_SPELLING, REFUSAL_RULES, Refused, address_refusal, operator_hint, url_check
from tools.network.resolver import addresses_checked

LOOPBACK_SPELLINGS = [
    "http://127.0.0.1/",
    "http://127.1/",
    "http://127.0.1/",
    "http://127.000.000.001/",
    "http://0177.0.0.1/",
    "http://0177.1/",
    "http://00000177.0.0.1/",
    "http://017700000001/",
    "http://0x7f.0x0.0x0.0x1/",
    "http://0x7f.1/",
    "http://0x7f000001/",
    "http://0X7F000001/",
    "http://2130706433/",
    "http://0/",
    "http://0.0.0.0/",
    "http://127.0.0.1./",
    "http://127.0.0.1.:80/",
    "http://[::1]/",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://[::]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[0:0:0:0:0:ffff:127.0.0.1]/",
    "http://[::127.0.0.1]/",
    "http://[fe80::1%25lo]/",
    "http://[64:ff9b::127.0.0.1]/",
    "http://１２７.０.０.１/",
    "http://127。0。0。1/",
    "http://①②⑦.⓪.⓪.①/",
    "http://١٢٧.٠.٠.١/",
    "http://127.0.0.1:80/",
    "http://127.0.0.1:8080/",
    "https://127.0.0.1:443/",
    "http://127.0.0.1%2f@example.org/",
    "http://LOCALHOST/",
    "http://localhost/",
    "http://localhost./",
    "http://localhost:8000/",
    "http://ｌｏｃａｌｈｏｓｔ/",
    "http://sub.localhost/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://100.100.100.200/",
    "http://10.0.0.1/",
    "http://192.168.1.1/",
    "http://172.16.0.1/",
    "http://100.64.0.1/",
    "http://1.1.1.1/",
    "http://8.8.8.8/",
    "http://[2606:4700:4700::1111]/",
    "http://nas/",
    "http://intranet/",
    "http://printer.local/",
    "http://router.lan/",
    "http://box.home.arpa/",
    "http://1.0.0.127.in-addr.arpa/",
    "http://foo.example.0x7f/",
    "http://example.123/",
]

MALFORMED = [
    "",
    "example.org",
    "//example.org/",
    "ftp://example.org/",
    "file:///etc/passwd",
    "gopher://example.org/",
    "javascript:alert(1)",
    "data:text/html,hi",
    "http:/example.org/",
    "http:example.org",
    "http://user:pass@example.org/",
    "http://user@example.org/",
    "http://@example.org/",
    "http://example.org@evil.example.com/",
    "http://example.org\\@evil.example.com/",
    "http://example.org\\.evil.example.com/",
    "http://exa mple.org/",
    "http://example.org/ path",
    "http://example.org/\tpath",
    "http://example.org/\npath",
    "http://example.org\x00.evil.example.com/",
    "http://exa%6dple.org/",
    "http://example.org%2f.evil.example.com/",
    "http://example%2eorg/",
    "http://[::1/",
    "http://example.org:99999/",
    "http://example.org:0/",
    "http://example.org:80a/",
    "http://a..b.example.org/",
    "http://" + "a" * 64 + ".example.org/",
    "http://exam!ple.org/",
    "http://example.org/" + "x" * 2100,
]


@pytest.mark.parametrize("url", LOOPBACK_SPELLINGS)
async def test_it_refuses_every_spelling_of_a_local_or_literal_address_before_any_lookup(url, dns):
    async def check() -> None:
        await addresses_checked(url_check(url))

    with pytest.raises(Refused) as refused:
        await check()

    assert refused.value.code in {"ip_literal", "local_name", "credentials", "invalid_url"}
    assert dns.asked == []


@pytest.mark.parametrize("url", MALFORMED)
def test_it_refuses_what_parsers_could_read_differently(url):
    with pytest.raises(Refused):
        url_check(url)


@pytest.mark.parametrize(
    ("url", "host", "port"),
    [
        ("https://example.org/", "example.org", 443),
        ("HTTP://Example.ORG:8080/a/b?q=1#frag", "example.org", 8080),
        ("https://münchen.example/straße", "xn--mnchen-3ya.example", 443),
        ("https://www.example.co.uk/path?x=%20y", "www.example.co.uk", 443),
        ("https://example.org./", "example.org.", 443),
    ],
)
def test_it_accepts_public_names_and_drops_the_fragment(url, host, port):
    target = url_check(url)

    assert (target.host, target.port, target.allowed, target.literal) == (host, port, False, False)
    assert target.url.fragment == ""


# (answers of the resolver, refused?)
RESOLVER_ANSWERS = [
    (["93.184.215.14"], None),
    (["2606:2800:21f:cb07:6820:80da:af6b:8b2c"], None),
    (["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"], None),
    (["127.0.0.1"], "a loopback address"),
    (["93.184.215.14", "10.0.0.5"], "a private address"),
    (["10.0.0.5", "93.184.215.14"], "a private address"),
    (["93.184.215.14", "169.254.169.254"], "a cloud metadata address"),
    (["169.254.10.1"], "a link-local address"),
    (["100.64.3.4"], "a shared (CGNAT) address"),
    (["100.100.100.200"], "a cloud metadata address"),
    (["168.63.129.16"], "a cloud metadata address"),
    (["0.0.0.0"], "an unspecified address"),
    (["224.0.0.251"], "a multicast address"),
    (["239.255.255.250"], "a multicast address"),
    (["255.255.255.255"], "a reserved address"),
    (["240.0.0.1"], "a reserved address"),
    (["192.0.0.8"], "a reserved address"),
    (["192.0.2.10"], "a documentation address"),
    (["198.51.100.7"], "a documentation address"),
    (["203.0.113.9"], "a documentation address"),
    (["198.18.0.1"], "a benchmark address"),
    (["172.31.255.255"], "a private address"),
    (["192.168.0.1"], "a private address"),
    (["::1"], "a loopback address"),
    (["::"], "an unspecified address"),
    (["::ffff:127.0.0.1"], "a loopback address"),
    (["::ffff:10.1.2.3"], "a private address"),
    (["::ffff:169.254.169.254"], "a cloud metadata address"),
    (["64:ff9b::a00:1"], "a private address"),
    (["64:ff9b::7f00:1"], "a loopback address"),
    (["2002:7f00:1::1"], "a loopback address"),
    (["2002:a00:1::1"], "a private address"),
    (["::7f00:1"], "a reserved address"),
    (["2001::1"], "a reserved address"),
    (["2001:db8::1"], "a documentation address"),
    (["fd00:ec2::254"], "a cloud metadata address"),
    (["fd12:3456::1"], "a private address"),
    (["fe80::1"], "a link-local address"),
    (["fe80::1%2"], "a link-local address"),
    (["ff02::1"], "a multicast address"),
    (["not-an-address"], "an address that is not plain IP (scoped or malformed)"),
]


@pytest.mark.parametrize(("answers", "reason"), RESOLVER_ANSWERS)
async def test_it_checks_every_address_a_name_resolves_to(answers, reason, dns: FakeDns):
    dns.add("site.example.org", *answers)
    target = url_check("https://site.example.org/page")

    if reason is None:
        assert await addresses_checked(target) == answers
        return
    with pytest.raises(Refused) as refused:
        await addresses_checked(target)
    assert refused.value.code == "address"
    assert reason in refused.value.message
    assert "site.example.org" not in refused.value.message
    assert all(address not in refused.value.message for address in answers)


@pytest.mark.parametrize(("answers", "reason"), RESOLVER_ANSWERS)
def test_it_names_the_same_reason_for_an_address_alone(answers, reason):
    reasons = [address_refusal(address) for address in answers]

    assert (next((r for r in reasons if r), None)) == reason


async def test_it_refuses_a_name_that_does_not_resolve(dns: FakeDns):
    with pytest.raises(Refused) as refused:
        await addresses_checked(url_check("https://nowhere.example.org/"))

    assert refused.value.code == "unresolved"
    assert dns.asked == ["nowhere.example.org"]


async def test_it_refuses_an_empty_answer(dns: FakeDns):
    dns.add("empty.example.org")

    with pytest.raises(Refused):
        await addresses_checked(url_check("https://empty.example.org/"))


@pytest.fixture
def allow(settings):
    def set_entries(*entries: tuple[str, int]) -> None:
        settings.CONFIG = dataclasses.replace(settings.CONFIG, network_allow=tuple(entries))

    return set_entries


async def test_it_lets_an_allowlisted_name_and_port_reach_a_private_address(allow, dns: FakeDns):
    allow(("wiki.home.example", 8080))
    dns.add("wiki.home.example", "192.168.1.20")

    target = url_check("http://wiki.home.example:8080/start")

    assert target.allowed
    assert await addresses_checked(target) == ["192.168.1.20"]


@pytest.mark.parametrize(
    "url",
    [
        "http://wiki.home.example:8081/",  # another port
        "http://wiki.home.example/",  # the default port
        "https://wiki.home.example/",
        "http://wiki.home.example.:8080/",  # another spelling of the name
        "http://www.wiki.home.example:8080/",
    ],
)
async def test_it_keeps_other_ports_and_spellings_of_an_allowlisted_name_refused(url, allow, dns: FakeDns):
    allow(("wiki.home.example", 8080))
    dns.add("wiki.home.example", "192.168.1.20")
    dns.add("wiki.home.example.", "192.168.1.20")
    dns.add("www.wiki.home.example", "192.168.1.20")

    with pytest.raises(Refused):
        await addresses_checked(url_check(url))


async def test_it_lets_an_allowlisted_ip_literal_through_without_a_lookup(allow, dns: FakeDns):
    allow(("127.0.0.1", 8080))

    target = url_check("http://127.0.0.1:8080/")

    assert (target.allowed, target.literal) == (True, True)
    assert await addresses_checked(target) == ["127.0.0.1"]
    assert dns.asked == []


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8081/",
        "http://127.1:8080/",
        "http://2130706433:8080/",
        "http://0x7f.0.0.1:8080/",
        "http://127.0.0.1.:8080/",
        "http://[::ffff:127.0.0.1]:8080/",
        "http://[::1]:8080/",
        "http://localhost:8080/",
        "http://１２７.0.0.1:8080/",
    ],
)
def test_it_keeps_other_spellings_of_an_allowlisted_address_refused(url, allow):
    allow(("127.0.0.1", 8080))

    with pytest.raises(Refused):
        url_check(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.1:8080/",
        "http://127.0.1:8080/",
        "http://2130706433:8080/",
        "http://0x7f.1:8080/",
        "http://0x7f000001:8080/",
        "http://0177.0.0.1:8080/",
        "http://017700000001:8080/",
        "http://127.0.0.1.:8080/",
        "http://１２７.0.0.1:8080/",
    ],
)
def test_it_says_an_allowlisted_address_is_allowed_only_as_the_allowlist_spells_it(url, allow):
    allow(("127.0.0.1", 8080))

    with pytest.raises(Refused) as refused:
        url_check(url)

    assert (refused.value.code, refused.value.message) == ("ip_literal", OTHER_SPELLING)


@pytest.mark.parametrize(
    ("url", "rule", "message"),
    [
        ("http://127.1:8081/", "loopback", "The URL names a loopback address, which Flarebot may not reach."),
        ("http://2130706434:8080/", "loopback", "The URL names a loopback address, which Flarebot may not reach."),
        (
            "http://[::ffff:127.0.0.1]:8080/",
            "loopback",
            "The URL names a loopback address, which Flarebot may not reach.",
        ),
        ("http://0x7f.1.1.1.1:8080/", "ip_literal", "URLs naming an IP address are refused; use a host name."),
        (
            "http://127.0.0.1:9/",
            "port",
            "The operator allows this host on another port only; port 9 is not allowed."
            " The URL names a loopback address, which Flarebot may not reach.",
        ),
    ],
    ids=["other-spelling-and-port", "other-address", "mapped-ipv6", "five-parts", "other-port"],
)
def test_it_refuses_other_addresses_and_ports_by_the_rule_they_break(url, rule, message, allow):
    allow(("127.0.0.1", 8080))

    with pytest.raises(Refused) as refused:
        url_check(url)

    assert (refused.value.rule, refused.value.message) == (rule, message)


# What each URL breaks, and the allowlist entry offered to the operator (None: the
# allowlist cannot spell it, or must not hold it). Nothing here is ever connected to.
RULES = [
    ("ftp://example.org/", "scheme", None),
    ("http://user@example.org/", "credentials", None),
    ("http://example.org:0/", "port", None),
    ("http://127.0.0.1:9/", "loopback", "127.0.0.1:9"),
    ("http://[::1]:9/", "loopback", "[::1]:9"),
    ("http://127.1:9/", "loopback", None),  # only the dotted form can be allowed
    ("http://10.0.0.1/", "private", "10.0.0.1:80"),
    ("https://192.168.1.5/", "private", "192.168.1.5:443"),
    ("http://[fd00::5]:8080/", "private", "[fd00::5]:8080"),
    ("http://169.254.1.1/", "link_local", "169.254.1.1:80"),
    ("http://[fe80::1]/", "link_local", "[fe80::1]:80"),
    ("http://100.64.0.1/", "cgnat", "100.64.0.1:80"),
    ("http://0.0.0.0/", "unspecified", "0.0.0.0:80"),
    ("http://224.0.0.1/", "multicast", "224.0.0.1:80"),
    ("http://192.0.2.1/", "documentation", "192.0.2.1:80"),
    ("http://169.254.169.254/latest/meta-data/", "metadata", None),  # never offered
    ("http://8.8.8.8/", "ip_literal", "8.8.8.8:80"),
    ("http://localhost:8000/", "local_name", "localhost:8000"),
    ("http://NAS:5000/", "local_name", "nas:5000"),
    ("http://ｌｏｃａｌｈｏｓｔ/", "local_name", None),
]


@pytest.mark.parametrize(("url", "rule", "entry"), RULES)
async def test_it_names_the_rule_that_refused_a_url_and_the_entry_that_would_allow_it(url, rule, entry, allow, dns):
    allow()

    with pytest.raises(Refused) as refused:
        await addresses_checked(url_check(url))

    assert refused.value.rule in REFUSAL_RULES
    assert (refused.value.rule, refused.value.entry, refused.value.redirect) == (rule, entry, False)
    assert dns.asked == []
    hint = operator_hint(refused.value)
    if entry is None:
        assert hint is None
        return
    assert f"FLAREBOT_NETWORK_ALLOW={entry} " in hint
    assert "FLAREBOT_NETWORK_ALLOW" not in refused.value.message  # the model's words carry no hint


@pytest.mark.parametrize(("url", "entry"), [(url, entry) for url, _, entry in RULES if entry is not None])
def test_the_entry_offered_is_what_the_operator_writes_and_it_allows_exactly_that_url(url, entry, allow, monkeypatch):
    monkeypatch.setenv("FLAREBOT_NETWORK_ALLOW", entry)
    allow(*env.load_config().network_allow)

    target = url_check(url)

    assert target.allowed
    with pytest.raises(Refused) as next_port:
        url_check(str(target.url.with_port(target.port + 1)))
    assert next_port.value.rule == "port"


async def test_it_names_the_address_rule_of_a_name_and_offers_the_name_as_the_url_spells_it(allow, dns: FakeDns):
    allow(("wiki.home.example", 8080))
    dns.add("wiki.home.example", "192.168.1.20")
    dns.add("printer.home.example", "fe80::5")

    with pytest.raises(Refused) as other_port:
        await addresses_checked(url_check("http://Wiki.Home.Example:8081/"))
    with pytest.raises(Refused) as link_local:
        await addresses_checked(url_check("https://printer.home.example/"))

    assert (other_port.value.code, other_port.value.rule, other_port.value.entry) == (
        "address",
        "port",
        "wiki.home.example:8081",
    )
    assert other_port.value.message == (
        "The operator allows this host on another port only; port 8081 is not allowed."
        " The host name resolves to a private address, which Flarebot may not reach."
    )
    assert (link_local.value.rule, link_local.value.entry) == ("link_local", "printer.home.example:443")
    assert "printer" not in link_local.value.message
    assert "fe80" not in link_local.value.message


def test_it_says_the_same_of_a_longer_spelling_of_an_allowlisted_ipv6_address(allow):
    allow(("[::1]", 8080))

    with pytest.raises(Refused) as refused:
        url_check("http://[0:0::1]:8080/")

    assert refused.value.message == OTHER_SPELLING


def test_it_matches_an_allowlisted_ipv6_entry_exactly(allow):
    allow(("[::1]", 8080))

    assert url_check("http://[::1]:8080/").allowed
    with pytest.raises(Refused):
        url_check("http://[0:0::1]:8080/")
