"""The request boundary over HTTP: who is refused, with which status and error, and what stays unchanged."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from conversations.models import Conversation
from flarebot.core.models import Installation
from flarebot.core.sessions import AUTH_AT_KEY, INSTALLATION_KEY

CONVERSATIONS = "/api/conversations/"
COOKIE = "__Host-flarebot-session"


def assert_error(response, status: int, code: str) -> None:
    """Assert the contract's error shape: exactly {"error": {"code", "message"}}."""
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    assert not response.has_header("Location")
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]


def send(client: Client, method: str, path: str, body: dict | None = None, **extra):
    """Send a JSON request with the given method."""
    if method == "GET":
        return client.get(path, **extra)
    return getattr(client, method.lower())(path, body or {}, content_type="application/json", **extra)


def client_like(signed_in: Client, origin: str | None) -> Client:
    """Return a client with signed_in's cookies and the given Origin header (or none)."""
    client = Client(headers={"Origin": origin} if origin is not None else None)
    client.cookies = signed_in.cookies
    return client


def signed_in_non_owner(installation: Installation) -> Client:
    """Return a client signed in as another user, its session stamped like the owner's."""
    user = get_user_model().objects.create_user(username="guest", password="a-guest-passphrase-77")
    client = Client(headers={"Origin": settings.FLAREBOT_ORIGIN})
    client.force_login(user)
    session = client.session
    session[AUTH_AT_KEY] = timezone.now().timestamp()
    session[INSTALLATION_KEY] = str(installation.installation_id)
    session.save()
    return client


@pytest.fixture
def conversation(owner: Installation) -> Conversation:
    return Conversation.objects.create(name="Quarterly plans")


def test_it_serves_the_owner_with_or_without_an_origin_on_get(owner_client, conversation):
    for client in (owner_client, client_like(owner_client, None)):
        response = client.get(CONVERSATIONS)

        assert response.status_code == 200
        assert [c["name"] for c in response.json()["conversations"]] == ["Quarterly plans"]


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_it_refuses_a_request_without_a_session_with_401(owner, anonymous_client, method):
    response = send(anonymous_client, method, CONVERSATIONS, {"name": "Sneaky"})

    assert_error(response, 401, "not_authenticated")
    assert not Conversation.objects.exists()


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_it_refuses_a_tampered_session_cookie(owner_client, conversation, method):
    real = owner_client.cookies[COOKIE].value
    owner_client.cookies[COOKIE] = real[:-1] + ("a" if real[-1] != "a" else "b")

    response = send(owner_client, method, CONVERSATIONS, {"name": "Sneaky"})

    assert_error(response, 401, "not_authenticated")
    assert list(Conversation.objects.values_list("name", flat=True)) == ["Quarterly plans"]


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_it_refuses_an_expired_session_and_ends_it(owner_client, conversation, method):
    session = owner_client.session
    session_key = session.session_key
    session[AUTH_AT_KEY] = (timezone.now() - timedelta(hours=8, seconds=1)).timestamp()
    session.save()

    response = send(owner_client, method, CONVERSATIONS, {"name": "Sneaky"})

    assert_error(response, 401, "not_authenticated")
    assert not Session.objects.filter(session_key=session_key).exists()
    assert_error(owner_client.get(CONVERSATIONS), 401, "not_authenticated")
    assert list(Conversation.objects.values_list("name", flat=True)) == ["Quarterly plans"]


def test_it_sends_an_expired_session_from_the_chat_page_to_the_sign_in_page(owner_client):
    session = owner_client.session
    session[AUTH_AT_KEY] = (timezone.now() - timedelta(hours=9)).timestamp()
    session.save()

    response = owner_client.get("/")

    assert response.status_code == 302
    assert response["Location"] == "/login/"
    assert not Session.objects.filter(session_key=session.session_key).exists()


def test_it_accepts_a_session_just_inside_its_eight_hours(owner_client, conversation):
    session = owner_client.session
    session[AUTH_AT_KEY] = (timezone.now() - timedelta(hours=7, minutes=59)).timestamp()
    session.save()

    assert owner_client.get(CONVERSATIONS).status_code == 200


def test_it_refuses_a_session_without_a_sign_in_time(owner_client, conversation):
    session = owner_client.session
    del session[AUTH_AT_KEY]
    session.save()

    assert_error(owner_client.get(CONVERSATIONS), 401, "not_authenticated")


@pytest.mark.parametrize("origin_header", ["https://evil.example", None, "null", "http://127.0.0.1:1"])
def test_it_refuses_a_create_without_the_exact_origin(owner_client, conversation, origin_header):
    client = client_like(owner_client, origin_header)

    response = client.post(CONVERSATIONS, {"name": "Sneaky"}, content_type="application/json")

    assert_error(response, 403, "origin_refused")
    assert list(Conversation.objects.values_list("name", flat=True)) == ["Quarterly plans"]


@pytest.mark.parametrize("origin_header", ["https://evil.example", None])
def test_it_refuses_a_rename_without_the_exact_origin(owner_client, conversation, origin_header):
    client = client_like(owner_client, origin_header)
    updated_at = conversation.updated_at

    response = client.patch(f"{CONVERSATIONS}{conversation.id}/", {"name": "Hijacked"}, content_type="application/json")

    assert_error(response, 403, "origin_refused")
    conversation.refresh_from_db()
    assert conversation.name == "Quarterly plans"
    assert conversation.updated_at == updated_at


@pytest.mark.parametrize("origin_header", ["https://evil.example", None])
def test_it_refuses_a_delete_without_the_exact_origin(owner_client, conversation, origin_header):
    client = client_like(owner_client, origin_header)

    response = client.delete(f"{CONVERSATIONS}{conversation.id}/")

    assert_error(response, 403, "origin_refused")
    assert Conversation.objects.get(id=conversation.id).state == "active"


def test_it_refuses_a_get_carrying_a_foreign_origin(owner_client, conversation):
    client = client_like(owner_client, "https://evil.example")

    response = client.get(CONVERSATIONS)

    assert_error(response, 403, "origin_refused")
    assert b"Quarterly plans" not in response.content


def test_it_refuses_a_duplicated_session_cookie(owner_client, conversation):
    value = owner_client.cookies[COOKIE].value

    for cookie in (f"{COOKIE}={value}; {COOKIE}={value}", f"{COOKIE}=forged; {COOKIE}={value}"):
        response = owner_client.post(
            CONVERSATIONS, {"name": "Sneaky"}, content_type="application/json", HTTP_COOKIE=cookie
        )

        assert_error(response, 401, "duplicate_cookie")
    assert list(Conversation.objects.values_list("name", flat=True)) == ["Quarterly plans"]


def test_it_treats_a_page_request_with_a_duplicated_session_cookie_as_signed_out(owner_client):
    value = owner_client.cookies[COOKIE].value

    response = owner_client.get("/", HTTP_COOKIE=f"{COOKIE}={value}; {COOKIE}={value}")

    assert response.status_code == 302
    assert response["Location"] == "/login/"


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_it_refuses_a_signed_in_user_who_is_not_the_owner(owner, conversation, method):
    client = signed_in_non_owner(owner)

    response = send(client, method, CONVERSATIONS, {"name": "Sneaky"})

    assert_error(response, 403, "not_owner")
    assert b"Quarterly plans" not in response.content
    assert list(Conversation.objects.values_list("name", flat=True)) == ["Quarterly plans"]


def test_it_sends_a_non_owner_to_the_sign_in_page(owner):
    client = signed_in_non_owner(owner)

    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"] == "/login/"


def test_it_answers_an_unknown_api_route_with_401_when_signed_out(owner, anonymous_client):
    assert_error(anonymous_client.get("/api/no-such-thing/"), 401, "not_authenticated")


def test_it_answers_an_unknown_api_route_with_a_json_404_for_the_owner(owner_client):
    assert_error(owner_client.get("/api/no-such-thing/"), 404, "not_found")


@pytest.mark.parametrize(
    ("who", "method", "path"),
    [
        ("owner", "GET", CONVERSATIONS),
        ("owner", "POST", CONVERSATIONS),
        ("owner", "GET", "/"),
        ("owner", "GET", "/api/schema/"),
        ("owner", "GET", "/api/no-such-thing/"),
        ("owner", "GET", "/no-such-page/"),
        ("owner", "GET", "/admin/"),
        ("anonymous", "GET", CONVERSATIONS),
        ("anonymous", "GET", "/"),
        ("anonymous", "GET", "/login/"),
        ("anonymous", "POST", "/login/"),
        ("foreign", "GET", CONVERSATIONS),
        ("foreign", "POST", "/login/"),
    ],
)
def test_it_marks_every_private_response_no_store(request, owner, who, method, path):
    if who == "owner":
        client = request.getfixturevalue("owner_client")
    else:
        client = Client(headers={"Origin": "https://evil.example" if who == "foreign" else settings.FLAREBOT_ORIGIN})

    response = send(client, method, path, {"name": "Cache me"})

    assert response["Cache-Control"] == "no-store"


def test_it_reports_status_and_nothing_else(owner_client):
    response = owner_client.get("/status/")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert COOKIE not in response.cookies


def test_it_reports_status_to_any_origin(owner, anonymous_client):
    response = anonymous_client.get("/status/", headers={"Origin": "https://evil.example"})

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_it_lets_pages_run_only_their_own_scripts_and_styles(owner_client):
    policy = owner_client.get("/")["Content-Security-Policy"]

    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in policy


def test_it_gives_the_sign_in_page_the_same_policy(owner, anonymous_client):
    assert "script-src 'self';" in anonymous_client.get("/login/")["Content-Security-Policy"]
