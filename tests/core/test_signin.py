"""The sign-in throttle under concurrency: attempts that arrive together are counted before any is checked.

The probe that found the race had 7 failures recorded and sent 40 wrong passwords at
once: all 40 were checked. Here the attempts run in threads of this process, each on its
own database connection, through the real sign-in view; a counting authentication
backend says how many passwords were checked.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import settings
from django.db import connections
from django.test import Client

from flarebot.core.models import Installation, SignInFailure
from tests.support.counting_auth import CountingBackend
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]

CLIENT = "203.0.113.7"
AT_ONCE = 40
RECORDED = 7
PER_ACCOUNT = settings.FLAREBOT_SIGNIN_FAILURES_PER_ACCOUNT
PER_CLIENT = settings.FLAREBOT_SIGNIN_FAILURES_PER_CLIENT


@pytest.fixture
def counting(settings) -> Iterator[type[CountingBackend]]:
    settings.AUTHENTICATION_BACKENDS = ["tests.support.counting_auth.CountingBackend"]
    CountingBackend.reset()
    yield CountingBackend
    CountingBackend.reset()


def record_failures(count: int) -> None:
    """Failures of this client on other accounts, as if it had been guessing already."""
    for n in range(count):
        SignInFailure.objects.create(client=CLIENT, account=f"earlier{n}")


def sign_in(username: str, password: str, address: str = CLIENT) -> int:
    client = Client(headers={"Origin": settings.FLAREBOT_ORIGIN}, REMOTE_ADDR=address)
    return client.post("/login/", {"username": username, "password": password}).status_code


def all_at_once(attempt: Callable[[int], int], count: int = AT_ONCE) -> Counter[int]:
    """Run count attempts in as many threads, released together; return how many got each status."""
    start = threading.Barrier(count)

    def run(n: int) -> int:
        try:
            start.wait()
            return attempt(n)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=count) as pool:
        return Counter(pool.map(run, range(count)))


def test_it_checks_only_the_accounts_limit_of_passwords_sent_at_once(owner: Installation, counting) -> None:
    record_failures(RECORDED)

    statuses = all_at_once(lambda n: sign_in(OWNER_USERNAME, f"wrong-guess-{n}"))

    assert counting.checked == PER_ACCOUNT
    assert statuses == Counter({400: PER_ACCOUNT, 429: AT_ONCE - PER_ACCOUNT})
    assert SignInFailure.objects.filter(client=CLIENT).count() == RECORDED + PER_ACCOUNT
    assert sign_in(OWNER_USERNAME, OWNER_PASSWORD) == 429
    assert counting.checked == PER_ACCOUNT


def test_it_checks_only_the_clients_limit_of_passwords_sent_at_once_across_accounts(
    owner: Installation, counting
) -> None:
    record_failures(RECORDED)

    statuses = all_at_once(lambda n: sign_in(f"account{n}", "wrong-guess"))

    allowed = PER_CLIENT - RECORDED
    assert counting.checked == allowed
    assert statuses == Counter({400: allowed, 429: AT_ONCE - allowed})
    assert SignInFailure.objects.filter(client=CLIENT).count() == PER_CLIENT
    assert sign_in(OWNER_USERNAME, OWNER_PASSWORD) == 429


def test_it_lets_the_owner_in_while_guesses_from_elsewhere_are_throttled(owner: Installation, counting) -> None:
    def attempt(n: int) -> int:
        if n == 0:
            return sign_in(OWNER_USERNAME, OWNER_PASSWORD, address="198.51.100.20")
        return sign_in(OWNER_USERNAME, f"wrong-guess-{n}")

    statuses = all_at_once(attempt, count=12)

    assert statuses == Counter({302: 1, 400: PER_ACCOUNT, 429: 12 - 1 - PER_ACCOUNT})
    assert counting.checked == PER_ACCOUNT + 1
    assert not SignInFailure.objects.filter(client="198.51.100.20").exists()
