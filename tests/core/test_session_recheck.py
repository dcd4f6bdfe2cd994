"""`owner_session_recheck`: what an open socket decides about its session before each frame.

It reads the installation, its owner and the session row in one statement; each case
here is a way a session stops holding that HTTP would refuse as well. Each runs on a
session checked for the first time and on one whose earlier check held (a socket that
sent a frame before), whose verdict the check may reuse while nothing changed.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from flarebot.core.models import Installation
from flarebot.core.sessions import AUTH_AT_KEY, SessionState, owner_session_recheck
from tests.support.owner import OWNER_USERNAME

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["first check", "checked before"])
def session_key(owner_client: Client, request: pytest.FixtureRequest) -> str:
    key = owner_client.cookies[settings.SESSION_COOKIE_NAME].value
    if request.param == "checked before":
        assert owner_session_recheck(session_key=key) is SessionState.VALID
    return key


def test_a_signed_in_owners_session_holds(session_key: str) -> None:
    assert owner_session_recheck(session_key=session_key) is SessionState.VALID


def test_an_unknown_session_key_is_absent(session_key: str) -> None:
    assert owner_session_recheck(session_key="x" * 32) is SessionState.ABSENT


def test_a_deleted_session_row_is_absent(session_key: str) -> None:
    Session.objects.filter(session_key=session_key).delete()

    assert owner_session_recheck(session_key=session_key) is SessionState.ABSENT


@pytest.mark.parametrize(("offset", "state"), [(1, SessionState.VALID), (0, SessionState.ABSENT)])
def test_the_session_rows_expiry_is_exclusive(
    session_key: str, offset: int, state: SessionState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Django's database backend loads a row: only while its expire_date is in the future."""
    now = timezone.now()
    Session.objects.filter(session_key=session_key).update(expire_date=now + timedelta(seconds=offset))
    monkeypatch.setattr(timezone, "now", lambda: now)

    assert owner_session_recheck(session_key=session_key) is state


def test_a_session_signed_in_more_than_8_hours_ago_is_expired(session_key: str) -> None:
    store = SessionStore(session_key=session_key)
    store[AUTH_AT_KEY] = time.time() - timedelta(hours=8).total_seconds() - 1
    store.save()

    assert owner_session_recheck(session_key=session_key) is SessionState.EXPIRED


@pytest.mark.parametrize(("after", "state"), [(-1, SessionState.VALID), (0, SessionState.EXPIRED)])
def test_a_session_expires_8_hours_after_sign_in_with_nothing_else_changed(
    session_key: str, after: int, state: SessionState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The time alone ends it: the exact moment 8 hours after sign-in no longer holds."""
    signed_in_at = SessionStore(session_key=session_key)[AUTH_AT_KEY]
    Session.objects.filter(session_key=session_key).update(expire_date=timezone.now() + timedelta(days=2))
    checks = owner_session_recheck(session_key=session_key)  # found valid with the later row
    at = datetime.fromtimestamp(signed_in_at, tz=timezone.get_current_timezone())
    monkeypatch.setattr(timezone, "now", lambda: at + timedelta(hours=8, seconds=after))

    assert checks is SessionState.VALID
    assert owner_session_recheck(session_key=session_key) is state


def test_a_changed_password_ends_the_session(session_key: str) -> None:
    owner = get_user_model().objects.get(username=OWNER_USERNAME)
    owner.set_password("a different long password")
    get_user_model().objects.filter(pk=owner.pk).update(password=owner.password)

    assert owner_session_recheck(session_key=session_key) is SessionState.ABSENT


def test_an_inactive_owner_is_not_the_owner(session_key: str) -> None:
    get_user_model().objects.filter(username=OWNER_USERNAME).update(is_active=False)

    assert owner_session_recheck(session_key=session_key) is SessionState.NOT_OWNER


def test_a_renamed_owner_is_not_the_owner(session_key: str) -> None:
    get_user_model().objects.filter(username=OWNER_USERNAME).update(username="someone-else")

    assert owner_session_recheck(session_key=session_key) is SessionState.NOT_OWNER


def test_without_an_installation_nobody_is_the_owner(session_key: str) -> None:
    Installation.objects.all().delete()

    assert owner_session_recheck(session_key=session_key) is SessionState.NOT_OWNER


def test_an_installation_of_another_schema_version_is_not_the_owners(session_key: str) -> None:
    Installation.objects.update(schema_version=0)

    assert owner_session_recheck(session_key=session_key) is SessionState.NOT_OWNER
