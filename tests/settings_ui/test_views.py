"""The pages: sign-in (with its throttle), sign-out, and the chat page."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from flarebot.core.models import SignInFailure
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME

COOKIE = "__Host-flarebot-session"
CONVERSATIONS = "/api/conversations/"
MISMATCH = "That username and password do not match."


def sign_in(client: Client, username: str = OWNER_USERNAME, password: str = OWNER_PASSWORD, **extra):
    return client.post("/login/", {"username": username, "password": password, **extra})


def shown_error(response) -> str:
    """Return the error message the sign-in page shows, or an empty string."""
    found = re.search(r'<p class="error" role="alert">(.*?)</p>', response.content.decode())
    return found.group(1) if found else ""


def is_signed_in(client: Client) -> bool:
    return client.get(CONVERSATIONS).status_code == 200


def test_it_renders_the_sign_in_page(owner, anonymous_client):
    response = anonymous_client.get("/login/")

    assert response.status_code == 200
    content = response.content.decode()
    assert 'name="username"' in content
    assert 'name="password"' in content
    assert 'name="csrfmiddlewaretoken"' in content
    assert COOKIE not in response.cookies


def test_it_signs_the_owner_in_with_a_host_prefixed_session_cookie(owner, anonymous_client):
    before = timezone.now()

    response = sign_in(anonymous_client)

    assert response.status_code == 302
    assert response["Location"] == "/"
    cookie = response.cookies[COOKIE]
    assert cookie["secure"] is True
    assert cookie["httponly"] is True
    assert cookie["samesite"] == "Lax"
    assert cookie["path"] == "/"
    assert not cookie["domain"]
    assert 0 < int(cookie["max-age"]) <= 8 * 3600
    session = Session.objects.get(session_key=cookie.value)
    assert session.expire_date <= before + timedelta(hours=8, seconds=5)
    assert is_signed_in(anonymous_client)


def test_it_gives_a_new_session_key_on_sign_in(owner, anonymous_client):
    planted = SessionStore()
    planted["planted"] = True
    planted.create()
    anonymous_client.cookies[COOKIE] = planted.session_key

    response = sign_in(anonymous_client)

    assert response.status_code == 302
    assert response.cookies[COOKIE].value != planted.session_key
    assert not Session.objects.filter(session_key=planted.session_key).exists()
    assert is_signed_in(anonymous_client)


def test_it_signs_in_through_the_csrf_protected_form(owner, origin):
    client = Client(enforce_csrf_checks=True, headers={"Origin": origin})
    page = client.get("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)

    without_token = sign_in(client)
    with_token = sign_in(client, csrfmiddlewaretoken=token)

    assert without_token.status_code == 403
    assert with_token.status_code == 302
    assert is_signed_in(client)


def test_it_gives_the_same_answer_for_a_wrong_password_and_an_unknown_user(owner, anonymous_client):
    wrong_password = sign_in(anonymous_client, password="not-the-owner-passphrase")
    unknown_user = sign_in(anonymous_client, username="nobody-here")

    assert wrong_password.status_code == unknown_user.status_code == 400
    assert shown_error(wrong_password) == shown_error(unknown_user) == MISMATCH
    assert COOKIE not in wrong_password.cookies
    assert COOKIE not in unknown_user.cookies
    assert not is_signed_in(anonymous_client)


def test_it_refuses_another_users_correct_credentials(owner, anonymous_client):
    get_user_model().objects.create_user(username="guest", password="a-guest-passphrase-77")

    response = sign_in(anonymous_client, username="guest", password="a-guest-passphrase-77")

    assert response.status_code == 400
    assert shown_error(response) == MISMATCH
    assert not is_signed_in(anonymous_client)


def test_it_throttles_the_sixth_attempt_after_five_failures(owner, anonymous_client):
    for _ in range(5):
        assert sign_in(anonymous_client, password="wrong-passphrase-here").status_code == 400

    response = sign_in(anonymous_client)

    assert response.status_code == 429
    assert "Wait 15 minutes" in shown_error(response)
    assert COOKIE not in response.cookies
    assert not is_signed_in(anonymous_client)


def test_it_lets_the_owner_in_after_four_failures(owner, anonymous_client):
    for _ in range(4):
        sign_in(anonymous_client, password="wrong-passphrase-here")

    assert sign_in(anonymous_client).status_code == 302
    assert not SignInFailure.objects.filter(account=OWNER_USERNAME).exists()


def test_it_does_not_block_the_owner_when_another_account_is_throttled(owner, anonymous_client):
    for _ in range(5):
        sign_in(anonymous_client, username="admin", password="guessing-passphrase")
    assert sign_in(anonymous_client, username="admin", password="guessing-passphrase").status_code == 429

    response = sign_in(anonymous_client)

    assert response.status_code == 302
    assert is_signed_in(anonymous_client)


def test_it_counts_an_account_name_regardless_of_case_and_spaces(owner, anonymous_client):
    for username in ("owner", "OWNER", " Owner", "owner ", "oWnEr"):
        sign_in(anonymous_client, username=username, password="wrong-passphrase-here")

    assert sign_in(anonymous_client).status_code == 429


def test_it_does_not_block_another_client(owner, anonymous_client, origin):
    for _ in range(5):
        sign_in(anonymous_client, password="wrong-passphrase-here")
    other = Client(headers={"Origin": origin}, REMOTE_ADDR="192.0.2.10")

    assert sign_in(other).status_code == 302
    assert sign_in(anonymous_client).status_code == 429


def test_it_blocks_a_client_after_twenty_failures_across_accounts(owner, anonymous_client):
    for attempt in range(20):
        assert sign_in(anonymous_client, username=f"user{attempt % 5}", password="guess").status_code == 400

    assert sign_in(anonymous_client).status_code == 429


def test_it_forgets_failures_older_than_fifteen_minutes(owner, anonymous_client):
    for _ in range(5):
        sign_in(anonymous_client, password="wrong-passphrase-here")
    SignInFailure.objects.update(created_at=timezone.now() - timedelta(minutes=14))
    assert sign_in(anonymous_client).status_code == 429

    SignInFailure.objects.update(created_at=timezone.now() - timedelta(minutes=15, seconds=1))

    assert sign_in(anonymous_client).status_code == 302
    assert is_signed_in(anonymous_client)


@pytest.mark.parametrize("origin_header", ["https://evil.example", None])
def test_it_refuses_a_sign_in_without_the_right_origin(owner, origin_header):
    client = Client(headers={"Origin": origin_header} if origin_header else None)

    response = sign_in(client)

    assert response.status_code == 403
    assert COOKIE not in response.cookies
    assert not Session.objects.exists()


def test_it_sends_a_signed_out_visitor_home_to_the_sign_in_page(owner, anonymous_client):
    response = anonymous_client.get("/")

    assert response.status_code == 302
    assert response["Location"] == "/login/"


def test_it_shows_the_chat_page_to_the_owner(owner_client):
    response = owner_client.get("/")

    assert response.status_code == 200
    assert b'action="/logout/"' in response.content


def test_the_chat_page_names_the_tools_whose_sources_it_lists(owner_client):
    response = owner_client.get("/")

    assert b'data-source-tools="browser_read read_url web_search"' in response.content


def test_it_sends_a_signed_in_owner_from_the_sign_in_page_home(owner_client):
    response = owner_client.get("/login/")

    assert response.status_code == 302
    assert response["Location"] == "/"


def test_it_ends_the_session_on_logout(owner_client):
    session_key = owner_client.cookies[COOKIE].value

    response = owner_client.post("/logout/")

    assert response.status_code == 302
    assert response["Location"] == "/login/"
    assert response.cookies[COOKIE].value == ""
    assert response.cookies[COOKIE]["max-age"] == 0
    assert not Session.objects.filter(session_key=session_key).exists()
    assert owner_client.get(CONVERSATIONS).status_code == 401
    assert owner_client.get("/")["Location"] == "/login/"


def test_it_keeps_the_session_when_logout_comes_from_another_origin(owner_client):
    foreign = Client(headers={"Origin": "https://evil.example"})
    foreign.cookies = owner_client.cookies

    assert foreign.post("/logout/").status_code == 403
    assert owner_client.get("/logout/").status_code == 405
    assert is_signed_in(owner_client)


@pytest.mark.parametrize(
    "target",
    ["https://evil.example", "https://evil.example/", "//evil.example", "/\\evil.example", "https:evil.example"],
)
def test_it_does_not_follow_a_redirect_off_the_site(owner, anonymous_client, target):
    page = anonymous_client.get("/login/", {"next": target})
    response = sign_in(anonymous_client, next=target)

    assert "evil.example" not in page.content.decode()
    assert response.status_code == 302
    assert response["Location"] == "/"
    assert anonymous_client.get("/login/", {"next": target})["Location"] == "/"


def test_it_follows_a_redirect_within_the_site(owner, anonymous_client):
    response = sign_in(anonymous_client, next="/admin/")

    assert response.status_code == 302
    assert response["Location"] == "/admin/"


def test_it_keeps_the_next_page_of_a_signed_in_owner(owner_client):
    assert owner_client.get("/login/", {"next": "/admin/"})["Location"] == "/admin/"
