"""Fixtures every test may use: the owner, signed-in clients, and the live stack."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import OperationalError
from django.test import Client, TransactionTestCase
from psycopg import sql

from flarebot.core.installation import owner_create
from flarebot.core.models import Installation
from tests.support.fake_providers import FakeProviders
from tests.support.live import LiveStack, start_live_stack
from tests.support.live_clients import OwnerClient, new_anthropic_key
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME
from tests.support.resources import release_redis_db


def _flush_retrying_deadlocks(self: TransactionTestCase) -> None:
    """Flush after a transactional test, again if it deadlocked with the live stack.

    The live worker or web may still be finishing a request of the test when its tables
    are truncated; PostgreSQL then picks one side of the deadlock to fail, and that must
    not fail the test.
    """
    for attempt in range(5):
        try:
            return _django_fixture_teardown(self)
        except OperationalError as error:
            if "deadlock" not in str(error) or attempt == 4:
                raise
            time.sleep(0.2 * (attempt + 1))


# A private hook of Django's test case (stable since 1.x), not in the type stubs.
_django_fixture_teardown = TransactionTestCase._fixture_teardown  # type: ignore[attr-defined]
TransactionTestCase._fixture_teardown = _flush_retrying_deadlocks  # type: ignore[attr-defined]


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the live-stack tests last, in their usual order.

    Once the live worker runs, it answers every turn that any test submits (through the
    doorbell or Celery, on the shared Redis and database), so tests that run the engine
    in this process must come before it starts.
    """
    items.sort(key=lambda item: item.get_closest_marker("live") is not None)
    if os.environ.get("FLAREBOT_TEST_DATABASE_ONLY") == "1":
        _deselect_tests_without_the_database(config, items)


# What a test must ask for before pytest-django lets it reach the database (directly, or
# through the live stack's processes that share it).
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_setup", "live_stack"})


def _deselect_tests_without_the_database(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep only tests that can reach the database: the second database's run repeats those.

    pytest-django blocks the database for every other test, so a test left out here cannot
    have depended on which database it ran on; it ran once, on SQLite, in the same command.
    """
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        reaches = item.get_closest_marker("django_db") is not None or bool(fixtures & DATABASE_FIXTURES)
        (keep if reaches else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _drop_leftover_test_database() -> None:
    """Drop this run's PostgreSQL test database if Django's teardown could not.

    Django refuses to drop it while a connection of some thread of this process is still
    open ("being accessed by other users"); runs must not pile databases up on the server.
    """
    database = settings.DATABASES["default"]
    if database["ENGINE"] != "django.db.backends.postgresql":
        return
    name = database["TEST"]["NAME"]
    server = f"postgresql://{database['USER']}@{database['HOST']}:{database['PORT']}/postgres"
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _drop_leftover_test_database()
    release_redis_db(os.environ["REDIS_URL"], os.environ["FLAREBOT_TEST_RUN_ID"])
    data_dir = os.environ["FLAREBOT_DATA_DIR"]
    if exitstatus == 0 and os.path.basename(data_dir).startswith("flarebot-test-"):
        shutil.rmtree(data_dir, ignore_errors=True)
    else:
        print(f"\nlogs and data of this run: {data_dir}")


@pytest.fixture
def origin() -> str:
    return settings.FLAREBOT_ORIGIN


@pytest.fixture
def owner(db: None) -> Installation:
    return owner_create(username=OWNER_USERNAME, password=OWNER_PASSWORD)


def signed_in_client(installation: Installation) -> Client:
    """Sign in through the real sign-in page and return the client."""
    client = Client(headers={"Origin": settings.FLAREBOT_ORIGIN})
    response = client.post("/login/", {"username": OWNER_USERNAME, "password": OWNER_PASSWORD})
    assert response.status_code == 302, response.content
    return client


@pytest.fixture
def owner_client(owner: Installation) -> Client:
    return signed_in_client(owner)


@pytest.fixture
def anonymous_client() -> Client:
    return Client(headers={"Origin": settings.FLAREBOT_ORIGIN})


@pytest.fixture(scope="session")
def live_stack(django_db_setup: None, django_db_blocker: object) -> Iterator[LiveStack]:
    stack = start_live_stack()
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="session")
def fake_providers_server() -> Iterator[FakeProviders]:
    server = FakeProviders(port=int(os.environ["FLAREBOT_TEST_PROVIDER_PORT"])).start()
    yield server
    server.stop()


@pytest.fixture
def fake_providers(fake_providers_server: FakeProviders) -> Iterator[FakeProviders]:
    """The loopback providers, with no script and no recorded request left from other tests."""
    fake_providers_server.reset()
    yield fake_providers_server
    fake_providers_server.reset()


@pytest.fixture
def live_owner(live_stack: LiveStack, owner: Installation) -> OwnerClient:
    """The owner signed in to the live stack over plain HTTP (beside any browser)."""
    return OwnerClient.sign_in(live_stack)


@pytest.fixture
def anthropic_key(live_owner: OwnerClient) -> str:
    """A fresh Anthropic key, set the way the settings page sets it."""
    key = new_anthropic_key()
    live_owner.set_provider_key("anthropic", key)
    return key


@pytest.fixture
def anthropic(owner: Installation, settings: Any, fake_providers: FakeProviders) -> Any:
    """Anthropic (with a key) as the provider of the next turns run in this process."""
    from tests.support.engine import provider_use

    return provider_use("anthropic", settings=settings, fake_providers=fake_providers)


@pytest.fixture
async def cancels() -> AsyncIterator[Any]:
    """The cancel listener of the turns a test runs in this process, stopped afterwards."""
    from conversations.cancel_bus import CancelListener
    from tests.support.engine import engine_cleanup

    listener = CancelListener()
    yield listener
    await engine_cleanup(listener)
