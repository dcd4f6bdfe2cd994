"""The processes as they run: daphne, a Celery worker and Celery beat, on this run's resources.

The owner signs in over real HTTP, sockets go through daphne's real WebSocket handshake,
and deletions are torn down by the real worker. Cookies are Secure, so over plain HTTP
they are read from Set-Cookie and sent back by hand.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from http.cookies import Morsel, SimpleCookie

import httpx
import pytest
from django.conf import settings
from django.utils import timezone
from django_celery_beat.models import PeriodicTask
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Origin

from conversations.models import Conversation, ConversationState
from flarebot.core.models import Installation, SignInFailure
from tests.support.live import LiveStack
from tests.support.live_clients import OwnerClient
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

SESSION_COOKIE = settings.SESSION_COOKIE_NAME
CSRF_COOKIE = settings.CSRF_COOKIE_NAME
WAIT_SECONDS = 30.0
HTTP_TIMEOUT = 10.0
BURST = 40

# Every cookie value the live stack issued during this run; none may reach a log.
ISSUED_SECRETS: set[str] = set()


def set_cookie_morsels(response: httpx.Response) -> dict[str, Morsel[str]]:
    jar: SimpleCookie = SimpleCookie()
    for header in response.headers.get_list("set-cookie"):
        jar.load(header)
    return dict(jar.items())


def set_cookies(response: httpx.Response) -> dict[str, str]:
    return {name: morsel.value for name, morsel in set_cookie_morsels(response).items()}


def sign_in(live: LiveStack, *, password: str = OWNER_PASSWORD) -> httpx.Response:
    """Sign in the way a browser does: fetch the page for its CSRF cookie and token, then post."""
    page = httpx.get(f"{live.base_url}/login/", timeout=HTTP_TIMEOUT)
    assert page.status_code == 200
    csrf_cookie = set_cookies(page)[CSRF_COOKIE]
    ISSUED_SECRETS.add(csrf_cookie)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token is not None
    response = httpx.post(
        f"{live.base_url}/login/",
        data={"csrfmiddlewaretoken": token.group(1), "username": OWNER_USERNAME, "password": password},
        headers={"Origin": live.origin, "Cookie": f"{CSRF_COOKIE}={csrf_cookie}"},
        timeout=HTTP_TIMEOUT,
    )
    ISSUED_SECRETS.update(set_cookies(response).values())
    return response


def owner_session(live: LiveStack) -> str:
    """Sign the owner in and return the session cookie's value."""
    response = sign_in(live)
    assert response.status_code == 302, response.text
    return set_cookies(response)[SESSION_COOKIE]


def sign_out(live: LiveStack, session_key: str) -> httpx.Response:
    """Sign out the way the chat page's button does: its CSRF token, then POST /logout/."""
    page = httpx.get(f"{live.base_url}/", headers={"Cookie": f"{SESSION_COOKIE}={session_key}"}, timeout=HTTP_TIMEOUT)
    assert page.status_code == 200
    csrf_cookie = set_cookies(page)[CSRF_COOKIE]
    ISSUED_SECRETS.add(csrf_cookie)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token is not None
    return httpx.post(
        f"{live.base_url}/logout/",
        data={"csrfmiddlewaretoken": token.group(1)},
        headers={"Origin": live.origin, "Cookie": f"{SESSION_COOKIE}={session_key}; {CSRF_COOKIE}={csrf_cookie}"},
        timeout=HTTP_TIMEOUT,
    )


def api(live: LiveStack, method: str, path: str, session_key: str | None, *, json: object = None) -> httpx.Response:
    headers = {"Origin": live.origin}
    if session_key is not None:
        headers["Cookie"] = f"{SESSION_COOKIE}={session_key}"
    return httpx.request(method, f"{live.base_url}{path}", headers=headers, json=json, timeout=HTTP_TIMEOUT)


def create_conversation(live: LiveStack, session_key: str, name: str) -> str:
    response = api(live, "POST", "/api/conversations/", session_key, json={"name": name})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def open_socket(
    live: LiveStack, conversation_id: str, session_key: str, *, origin: str | None = None
) -> ClientConnection:
    ws_url = live.base_url.replace("http://", "ws://", 1) + f"/ws/conversations/{conversation_id}/"
    return connect(
        ws_url,
        origin=Origin(origin or live.origin),
        additional_headers={"Cookie": f"{SESSION_COOKIE}={session_key}"},
        proxy=None,
        open_timeout=HTTP_TIMEOUT,
    )


def wait_until(live: LiveStack, condition: Callable[[], bool], what: str) -> None:
    """Poll until the condition holds; fail early, with its log, if a process died."""
    live.stack.wait_for(condition, timeout=WAIT_SECONDS, what=what)


def conversation_exists(conversation_id: str | uuid.UUID) -> bool:
    return Conversation.objects.filter(id=conversation_id).exists()


def test_it_signs_the_owner_in_over_http_and_opens_the_api_only_to_that_session(
    live_stack: LiveStack, owner: Installation
) -> None:
    refused = api(live_stack, "GET", "/api/conversations/", None)
    wrong = sign_in(live_stack, password="not-the-owner-passphrase")
    signed_in = sign_in(live_stack)
    cookie = set_cookie_morsels(signed_in)[SESSION_COOKIE]
    allowed = api(live_stack, "GET", "/api/conversations/", cookie.value)

    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "not_authenticated"
    assert wrong.status_code == 400
    assert SESSION_COOKIE not in set_cookies(wrong)
    assert signed_in.status_code == 302
    assert signed_in.headers["Location"] == "/"
    assert cookie["secure"] is True
    assert cookie["httponly"] is True
    assert cookie["samesite"] == "Lax"
    assert cookie["path"] == "/"
    assert 0 < int(cookie["max-age"]) <= 8 * 3600
    assert allowed.status_code == 200
    assert allowed.json() == {"conversations": []}
    assert allowed.headers["Cache-Control"] == "no-store"


def ws_url(live: LiveStack, path: str) -> str:
    return live.base_url.replace("http://", "ws://", 1) + path


def close_code(socket: ClientConnection) -> int:
    """Wait for the server to close the socket and return its code; any frame before that fails the test."""
    with pytest.raises(ConnectionClosed) as closed:  # a frame first fails here: DID NOT RAISE
        socket.recv(timeout=WAIT_SECONDS)
    assert closed.value.rcvd is not None, "the server closed without a close frame"
    return closed.value.rcvd.code


def refusal_code(live: LiveStack, path: str, *, cookie: str | None, origin: str) -> int:
    """Open a socket as a browser would and return the code it is closed with."""
    headers = {"Cookie": f"{SESSION_COOKIE}={cookie}"} if cookie is not None else {}
    with connect(
        ws_url(live, path), origin=Origin(origin), additional_headers=headers, proxy=None, open_timeout=HTTP_TIMEOUT
    ) as socket:
        return close_code(socket)


def test_it_accepts_a_refused_handshake_and_closes_it_with_its_code_so_browsers_can_read_it(
    live_stack: LiveStack, owner: Installation
) -> None:
    session_key = owner_session(live_stack)
    signed_out_key = owner_session(live_stack)
    assert sign_out(live_stack, signed_out_key).status_code == 302
    conversation_id = create_conversation(live_stack, session_key, "Handshakes")
    deleted_id = create_conversation(live_stack, session_key, "Deleted")
    assert api(live_stack, "DELETE", f"/api/conversations/{deleted_id}/", session_key).status_code == 204
    path = f"/ws/conversations/{conversation_id}/"
    origin = live_stack.origin

    codes = {
        "no session": refusal_code(live_stack, path, cookie=None, origin=origin),
        "signed-out session": refusal_code(live_stack, path, cookie=signed_out_key, origin=origin),
        "made-up session": refusal_code(live_stack, path, cookie="x" * 32, origin=origin),
        "foreign origin": refusal_code(live_stack, path, cookie=session_key, origin="https://evil.example"),
        "unknown conversation": refusal_code(
            live_stack, f"/ws/conversations/{uuid.uuid4()}/", cookie=session_key, origin=origin
        ),
        "deleted conversation": refusal_code(
            live_stack, f"/ws/conversations/{deleted_id}/", cookie=session_key, origin=origin
        ),
        "unknown path": refusal_code(live_stack, "/ws/elsewhere/", cookie=session_key, origin=origin),
    }

    assert codes == {
        "no session": 4001,
        "signed-out session": 4001,
        "made-up session": 4001,
        "foreign origin": 4003,
        "unknown conversation": 4004,
        "deleted conversation": 4004,
        "unknown path": 4004,
    }
    with open_socket(live_stack, conversation_id, session_key) as socket:
        socket.send('{"type": "no_such_frame"}')
        answer = json.loads(socket.recv(timeout=HTTP_TIMEOUT))
    assert answer["type"] == "error"
    assert answer["code"] == "unknown_frame_type"
    # A malformed query: what is wrong, then the close code the contract gives (not 1011).
    since = live_stack.log_size("web")
    with connect(
        ws_url(live_stack, f"{path}?last_sequence=-1"),
        origin=Origin(origin),
        additional_headers={"Cookie": f"{SESSION_COOKIE}={session_key}"},
        proxy=None,
        open_timeout=HTTP_TIMEOUT,
    ) as socket:
        error = json.loads(socket.recv(timeout=HTTP_TIMEOUT))
        code = close_code(socket)
    assert (error["type"], error["code"]) == ("error", "invalid_last_sequence")
    assert code == 4400
    assert "Traceback" not in live_stack.log_since("web", since)


def admin_sign_out(live: LiveStack, session_key: str) -> httpx.Response:
    """Sign out with the admin's own button: the CSRF token of the admin page, then POST /admin/logout/."""
    page = httpx.get(
        f"{live.base_url}/admin/", headers={"Cookie": f"{SESSION_COOKIE}={session_key}"}, timeout=HTTP_TIMEOUT
    )
    assert page.status_code == 200
    csrf_cookie = set_cookies(page)[CSRF_COOKIE]
    ISSUED_SECRETS.add(csrf_cookie)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token is not None
    return httpx.post(
        f"{live.base_url}/admin/logout/",
        data={"csrfmiddlewaretoken": token.group(1)},
        headers={"Origin": live.origin, "Cookie": f"{SESSION_COOKIE}={session_key}; {CSRF_COOKIE}={csrf_cookie}"},
        timeout=HTTP_TIMEOUT,
    )


def test_it_closes_the_real_socket_with_4001_when_the_owner_signs_out_in_the_admin(
    live_stack: LiveStack, owner: Installation
) -> None:
    session_key = owner_session(live_stack)
    conversation_id = create_conversation(live_stack, session_key, "Admin sign-out")

    with open_socket(live_stack, conversation_id, session_key) as socket:
        signed_out = admin_sign_out(live_stack, session_key)
        code = close_code(socket)

    assert signed_out.status_code == 200
    assert code == 4001
    assert api(live_stack, "GET", "/api/conversations/", session_key).status_code == 401


def test_it_throttles_the_real_peer_whatever_x_forwarded_for_says(live_stack: LiveStack, owner: Installation) -> None:
    page = httpx.get(f"{live_stack.base_url}/login/", timeout=HTTP_TIMEOUT)
    csrf_cookie = set_cookies(page)[CSRF_COOKIE]
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token is not None

    def attempt(password: str, forwarded: str) -> int:
        response = httpx.post(
            f"{live_stack.base_url}/login/",
            data={"csrfmiddlewaretoken": token.group(1), "username": OWNER_USERNAME, "password": password},
            headers={
                "Origin": live_stack.origin,
                "Cookie": f"{CSRF_COOKIE}={csrf_cookie}",
                "X-Forwarded-For": forwarded,
            },
            timeout=HTTP_TIMEOUT,
        )
        return response.status_code

    guesses = [attempt(f"wrong-guess-{n}", f"198.51.100.{n}") for n in range(6)]

    assert guesses == [400] * 5 + [429]
    assert attempt(OWNER_PASSWORD, "198.51.100.250") == 429
    assert set(SignInFailure.objects.values_list("client", flat=True)) == {"127.0.0.1"}


@pytest.mark.database
def test_it_checks_no_more_passwords_than_the_limit_when_forty_arrive_at_once(
    live_stack: LiveStack, owner: Installation
) -> None:
    for n in range(7):
        SignInFailure.objects.create(client="127.0.0.1", account=f"earlier{n}")
    page = httpx.get(f"{live_stack.base_url}/login/", timeout=HTTP_TIMEOUT)
    csrf_cookie = set_cookies(page)[CSRF_COOKIE]
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token is not None
    start = threading.Barrier(40)

    def attempt(n: int) -> int:
        start.wait()
        return httpx.post(
            f"{live_stack.base_url}/login/",
            data={"csrfmiddlewaretoken": token.group(1), "username": OWNER_USERNAME, "password": f"wrong-{n}"},
            headers={"Origin": live_stack.origin, "Cookie": f"{CSRF_COOKIE}={csrf_cookie}"},
            timeout=WAIT_SECONDS,
        ).status_code

    with ThreadPoolExecutor(max_workers=40) as pool:
        statuses = Counter(pool.map(attempt, range(40)))

    assert statuses == Counter({400: 5, 429: 35})
    assert SignInFailure.objects.filter(client="127.0.0.1").count() == 7 + 5


@pytest.mark.database
def test_a_burst_of_requests_leaves_the_web_process_no_more_database_connections_than_before(
    live_stack: LiveStack, live_owner: OwnerClient
) -> None:
    # A page opens with several requests at once; a hundred kept connections exhausted PostgreSQL.
    before = live_stack.database_connections("web")
    with ThreadPoolExecutor(max_workers=BURST) as pool:
        statuses = list(pool.map(lambda _: live_owner.api("GET", "/api/conversations/").status_code, range(BURST)))
    assert statuses == [200] * BURST
    deadline = time.monotonic() + WAIT_SECONDS
    while (held := live_stack.database_connections("web")) > before:
        assert time.monotonic() < deadline, f"the web process still holds {held} connections, {before} before"
        time.sleep(0.1)


def test_it_closes_the_socket_with_4004_and_tears_the_conversation_down_when_deleted_over_http(
    live_stack: LiveStack, owner: Installation
) -> None:
    session_key = owner_session(live_stack)
    conversation_id = create_conversation(live_stack, session_key, "To be deleted")
    kept_id = create_conversation(live_stack, session_key, "To be kept")

    with open_socket(live_stack, conversation_id, session_key) as socket:
        deleted = api(live_stack, "DELETE", f"/api/conversations/{conversation_id}/", session_key)
        with pytest.raises(ConnectionClosed) as closed:
            socket.recv(timeout=WAIT_SECONDS)

    assert deleted.status_code == 204
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4004
    wait_until(live_stack, lambda: not conversation_exists(conversation_id), "the worker to tear the conversation down")
    listed = api(live_stack, "GET", "/api/conversations/", session_key).json()["conversations"]
    assert [c["id"] for c in listed] == [kept_id]


def test_it_closes_the_real_socket_with_4001_when_the_owner_signs_out(
    live_stack: LiveStack, owner: Installation
) -> None:
    session_key = owner_session(live_stack)
    conversation_id = create_conversation(live_stack, session_key, "Signing out")

    with open_socket(live_stack, conversation_id, session_key) as socket:
        signed_out = sign_out(live_stack, session_key)
        code = close_code(socket)

    assert signed_out.status_code == 302
    assert code == 4001
    assert api(live_stack, "GET", "/api/conversations/", session_key).status_code == 401


def test_it_finishes_an_interrupted_deletion_when_the_worker_restarts(
    live_stack: LiveStack, owner: Installation
) -> None:
    interrupted = Conversation.objects.create(
        name="Interrupted", state=ConversationState.DELETING, deletion_requested_at=timezone.now()
    )
    active = Conversation.objects.create(name="Active")

    live_stack.restart("worker")

    wait_until(
        live_stack, lambda: not conversation_exists(interrupted.id), "the restarted worker to finish the deletion"
    )
    assert Conversation.objects.get(id=active.id).state == ConversationState.ACTIVE


@pytest.mark.database
def test_it_runs_beat_with_the_deletion_sweep_on_its_database_schedule(
    live_stack: LiveStack, owner: Installation
) -> None:
    since = live_stack.log_size("beat")
    live_stack.restart("beat")

    def sweep_is_scheduled() -> bool:
        return PeriodicTask.objects.filter(
            name="conversations-finish-deletions", task="conversations.jobs.conversation_finish_deletions"
        ).exists()

    wait_until(live_stack, sweep_is_scheduled, "beat to write its schedule")
    sweep = PeriodicTask.objects.get(name="conversations-finish-deletions")
    assert sweep.enabled
    assert sweep.interval is not None
    assert (sweep.interval.every, sweep.interval.period) == (300, "seconds")
    assert "DatabaseScheduler" in live_stack.log_since("beat", since)

    # Make the sweep due now, as if beat had been down for a while: beat sends it and the
    # worker finishes a deletion nobody else would. Only once beat ticks: while it starts it
    # writes its fixed jobs' rows again (django-celery-beat reads each row, then saves it
    # whole), which would undo a change made in between.
    wait_until(
        live_stack,
        lambda: re.search(r"beat: Starting.*Sending due task", live_stack.log_since("beat", since), re.S) is not None,
        "beat to tick",
    )
    interrupted = Conversation.objects.create(
        name="Interrupted", state=ConversationState.DELETING, deletion_requested_at=timezone.now()
    )
    sweep = PeriodicTask.objects.get(name="conversations-finish-deletions")
    sweep.last_run_at = timezone.now() - timedelta(days=1)
    sweep.save()

    wait_until(
        live_stack,
        lambda: (
            "Sending due task conversations-finish-deletions" in live_stack.log_since("beat", since)
            and not conversation_exists(interrupted.id)
        ),
        "beat to send the sweep and the worker to finish the deletion",
    )


def test_it_never_writes_the_password_or_a_session_cookie_to_the_logs(
    live_stack: LiveStack, owner: Installation
) -> None:
    worker_log_start = live_stack.log_size("worker")
    wrong_password = f"wrong-{secrets.token_urlsafe(12)}"
    assert sign_in(live_stack, password=wrong_password).status_code == 400
    session_key = owner_session(live_stack)
    conversation_id = create_conversation(live_stack, session_key, "Secrets")
    with open_socket(live_stack, conversation_id, session_key) as socket:
        socket.send(json.dumps({"type": "user_message", "request_id": "x", "text": OWNER_PASSWORD}))
        socket.recv(timeout=HTTP_TIMEOUT)
    assert sign_out(live_stack, session_key).status_code == 302
    second_session_key = owner_session(live_stack)
    assert api(live_stack, "DELETE", f"/api/conversations/{conversation_id}/", second_session_key).status_code == 204
    # The teardown's log line marks the point up to which everything above was logged.
    wait_until(
        live_stack,
        lambda: (
            not conversation_exists(conversation_id)
            and re.search(
                r"conversation_teardown\[[^\]]+\] succeeded", live_stack.log_since("worker", worker_log_start)
            )
            is not None
        ),
        "the worker to log the teardown",
    )

    logs = live_stack.logs()

    assert "conversation_teardown" in logs
    for secret in {OWNER_PASSWORD, wrong_password, session_key, second_session_key, *ISSUED_SECRETS}:
        assert secret not in logs
