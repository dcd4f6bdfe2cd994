"""The typed environment: defaults that depend on the machine."""

from __future__ import annotations

import pytest

from flarebot.core import env


@pytest.mark.parametrize("cores", [None, 1, 2, 16])
def test_it_runs_one_worker_process_whatever_the_cores(monkeypatch, cores):
    monkeypatch.delenv("FLAREBOT_WORKER_PROCESSES", raising=False)
    monkeypatch.setattr(env.os, "cpu_count", lambda: cores)

    assert env.load_config().worker_processes == 1


def test_it_takes_the_operators_number_of_worker_processes(monkeypatch):
    monkeypatch.setenv("FLAREBOT_WORKER_PROCESSES", "3")

    assert env.load_config().worker_processes == 3


def test_it_trusts_no_proxy_by_default(monkeypatch):
    monkeypatch.delenv("FLAREBOT_TRUSTED_PROXIES", raising=False)

    assert env.load_config().trusted_proxies == ()


def test_it_reads_trusted_proxies_as_addresses_and_networks(monkeypatch):
    monkeypatch.setenv("FLAREBOT_TRUSTED_PROXIES", " 172.30.80.0/24, 10.0.0.7 ,2001:db8::/48,, 172.30.80.0/24")

    assert [str(n) for n in env.load_config().trusted_proxies] == ["172.30.80.0/24", "10.0.0.7/32", "2001:db8::/48"]


@pytest.mark.parametrize("value", ["proxy.example", "10.0.0.0/33", "10.0.0.1-10.0.0.9", "*"])
def test_it_refuses_trusted_proxies_that_are_not_addresses(monkeypatch, value):
    monkeypatch.setenv("FLAREBOT_TRUSTED_PROXIES", f"10.0.0.1,{value}")

    with pytest.raises(env.ConfigurationError, match="FLAREBOT_TRUSTED_PROXIES"):
        env.load_config()


def test_it_allows_no_private_host_by_default(monkeypatch):
    monkeypatch.delenv("FLAREBOT_NETWORK_ALLOW", raising=False)

    assert env.load_config().network_allow == ()


def test_it_reads_the_network_allowlist_as_exact_host_and_port_pairs(monkeypatch):
    monkeypatch.setenv(
        "FLAREBOT_NETWORK_ALLOW", " Wiki.Home.example:8080, 192.168.1.5:80,[fd00::5]:443,, 192.168.1.5:80"
    )

    assert env.load_config().network_allow == (("wiki.home.example", 8080), ("192.168.1.5", 80), ("[fd00::5]", 443))


@pytest.mark.parametrize(
    "entry", ["wiki.home.example", "wiki:0", "wiki:65536", "wiki:http", "127.1:80", "0x7f000001:80", "[::1", "a b:80"]
)
def test_it_refuses_allowlist_entries_that_are_not_one_host_and_port(monkeypatch, entry):
    monkeypatch.setenv("FLAREBOT_NETWORK_ALLOW", entry)

    with pytest.raises(env.ConfigurationError, match="FLAREBOT_NETWORK_ALLOW"):
        env.load_config()


def test_it_takes_the_operators_search_model_and_chromium(monkeypatch):
    monkeypatch.setenv("FLAREBOT_SEARCH_MODEL", "gpt-search")
    monkeypatch.setenv("FLAREBOT_CHROMIUM", "/opt/chromium/chrome")

    config = env.load_config()

    assert (config.search_model, config.chromium) == ("gpt-search", "/opt/chromium/chrome")


def test_a_paused_browser_tasks_context_is_kept_ten_minutes_unless_the_operator_says_otherwise(monkeypatch):
    monkeypatch.delenv("FLAREBOT_BROWSER_TASK_KEEP", raising=False)
    assert env.load_config().browser_task_keep == 600.0

    monkeypatch.setenv("FLAREBOT_BROWSER_TASK_KEEP", "30")
    assert env.load_config().browser_task_keep == 30.0


@pytest.mark.parametrize("value", ["0", "-1", "ten", "86401"])
def test_it_refuses_a_keep_time_outside_one_second_to_a_day(monkeypatch, value):
    monkeypatch.setenv("FLAREBOT_BROWSER_TASK_KEEP", value)

    with pytest.raises(env.ConfigurationError, match="FLAREBOT_BROWSER_TASK_KEEP"):
        env.load_config()


def test_shell_containers_have_no_network_unless_the_operator_names_one(monkeypatch):
    monkeypatch.delenv("FLAREBOT_SHELL_NETWORK", raising=False)
    assert env.load_config().shell_network is None
    monkeypatch.setenv("FLAREBOT_SHELL_NETWORK", "none")
    assert env.load_config().shell_network is None
    monkeypatch.setenv("FLAREBOT_SHELL_NETWORK", "sandbox-egress_1.net")
    assert env.load_config().shell_network == "sandbox-egress_1.net"


@pytest.mark.parametrize("value", ["host", "container:abc", "net work", "-flag", "a/b"])
def test_it_refuses_a_shell_network_that_is_not_a_plain_network_name(monkeypatch, value):
    monkeypatch.setenv("FLAREBOT_SHELL_NETWORK", value)

    with pytest.raises(env.ConfigurationError, match="FLAREBOT_SHELL_NETWORK"):
        env.load_config()
