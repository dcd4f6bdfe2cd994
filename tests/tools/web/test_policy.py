# ruff: noqa: RUF001 (the look-alike characters are the point of these tables)
"""The network policy as a table: hostile URLs, resolver answers, and the operator's allowlist.

The spellings of loopback and private addresses come from public SSRF bypass lists
(PayloadsAllTheThings' "Server Side Request Forgery", HackTricks' "URL format bypass",
OWASP's SSRF prevention cheat sheet): each must be refused before any lookup.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.support.fake_dns import FakeDns
from tools.network.policy import OTHER_SPELLING, Refused, address_refusal, url_check
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
    "url",
    ["http://127.1:8081/", "http://2130706434:8080/", "http://[::ffff:127.0.0.1]:8080/", "http://0x7f.1.1.1.1:8080/"],
    ids=["other-port", "other-address", "mapped-ipv6", "five-parts"],
)
def test_it_refuses_other_addresses_and_ports_as_any_ip_literal(url, allow):
    allow(("127.0.0.1", 8080))

    with pytest.raises(Refused) as refused:
        url_check(url)

    assert refused.value.message == "URLs naming an IP address are refused; use a host name."


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
