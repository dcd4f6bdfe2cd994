"""Schemathesis over the OpenAPI document, against the real application in this process.

Every operation is called as the signed-in owner with Flarebot's own Origin, with
requests the schema allows and ones it forbids, and each answer must be what the schema
says: no server error, a documented status, the declared content type, a body of the
declared shape; valid requests accepted, invalid ones refused; an undeclared method 405;
no 2xx without the session cookie. A positive request is sent once more with the ids of
rows that exist, so that each operation's success is checked too, and each operation must
have been answered past the session guard (and, where the rows allow, with a 2xx).

All of schemathesis' checks run (its default). The document under test is generated at
import, as the schema view makes it, and the first test checks that it is the one the owner
is served. Requests go through Django's WSGI handler in this thread, inside the test's
transaction, so nothing a request enqueues after commit ever runs; a saved provider key is
checked with the loopback fake providers. Examples are bounded and derandomized, so a run
is repeatable.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
import schemathesis
import yaml
from django.conf import settings
from django.contrib.sessions.models import Session
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from attachments import services as attachment_services
from attachments.models import MediaType
from attachments.storage import tmp_dir
from attachments.uploads import Upload
from conversations import services as conversation_services
from conversations.turns import turn_submit
from memory import services as memory_services
from notifications import services as notification_services
from tasks import services as task_services
from tests.conftest import signed_in_client
from tools.models import WriteProposal

HANDLER = WSGIHandler()


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """Django's WSGI handler, keeping the test's database connection (as Django's test client does)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        response = HANDLER(environ, start_response)
        try:
            return [b"".join(response)]
        finally:
            response.close()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


# JSON round trip: the generator's document holds lazy strings.
DOCUMENT = json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str))
OPERATIONS = {f"{method.upper()} {path}" for path, item in DOCUMENT["paths"].items() for method in item}
# The session a real sign-in made is moved to this key: schemathesis builds some requests
# when it collects the tests, before any sign-in, and it drops or spoils this cookie to
# check that the guard refuses.
SESSION_KEY = "schemathesis0owner0session0key00"
CONFIG = schemathesis.Config.from_dict(
    {
        "seed": 24,
        "auth": {"openapi": {"ownerSession": {"api_key": SESSION_KEY}}},
        "generation": {"max-examples": 15, "deterministic": True, "database": "none"},
        "headers": {"Origin": settings.FLAREBOT_ORIGIN},
        "phases": {"stateful": {"enabled": False}},
        "operations": [
            {
                # What JSON Schema cannot say, and a valid request may still be refused for (400):
                # a cursor is one the endpoint returned; an instant is in the future and a cron
                # expression occurs; the current password is the owner's; a read mark is at most
                # the conversation's last event; Apprise can parse a destination's URL; quiet
                # hours end at another time than they start, in an IANA zone; a file part has a
                # filename, and the file a type Flarebot takes; an attachment id names a file
                # uploaded to the conversation.
                "include-name": name,
                "checks": {"positive_data_acceptance": {"expected-statuses": ["2xx", "400", "404", "409", "429"]}},
            }
            for name in (
                "GET /api/conversations/{conversation_id}/activities/",
                "POST /api/conversations/{conversation_id}/attachments/",
                "POST /api/attachments/",
                "POST /api/conversations/{conversation_id}/messages/",
                "GET /api/tasks/{task_id}/runs/",
                "POST /api/account/password/",
                "POST /api/conversations/{conversation_id}/read/",
                "POST /api/notifications/destinations/",
                "PUT /api/notifications/settings/",
                "POST /api/tasks/",
                "PUT /api/tasks/{task_id}/",
            )
        ]
        + [
            {
                # A title needs a model that answers, and none is configured here: its 502
                # `title_unavailable` is the documented answer (a provider's failure), not a
                # server error. tests/conversations/test_titles.py asks the loopback model.
                "include-name": "POST /api/conversations/{conversation_id}/title/",
                "checks": {
                    "not_a_server_error": {"enabled": False},
                    "positive_data_acceptance": {"expected-statuses": ["2xx", "404", "409", "502"]},
                },
            }
        ],
    }
)
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG)
SCHEMA.app = application

# Operations whose 2xx needs what generated requests do not make: an unfinished turn or
# browser task to stop, a browser-task proposal to start, a schedule that occurs in the
# future (GET /api/tasks/{task_id}/ checks the task's shape), the owner's current password.
NO_SUCCESS_EXPECTED = {
    "DELETE /api/agent/",
    # A multipart file part needs a filename, which the schema cannot say: the generated
    # part is a plain field (400 `invalid_upload`); tests/attachments/test_api.py uploads.
    "POST /api/conversations/{conversation_id}/attachments/",
    "POST /api/attachments/",
    "POST /api/account/password/",
    "POST /api/conversations/{conversation_id}/browser-tasks/",
    "POST /api/tasks/",
    "PUT /api/tasks/{task_id}/",
    # A title needs a model that answers (above).
    "POST /api/conversations/{conversation_id}/title/",
}


@pytest.fixture
def existing(owner) -> dict[str, str]:
    """Path parameters naming rows that exist."""
    conversation = conversation_services.conversation_create(name="Reading list")
    fact = memory_services.fact_create(content="The owner reads in the morning.")
    data = task_services.task_input_clean(
        name="Digest",
        instructions="Summarize the reading list.",
        schedule={"kind": "cron", "expression": "0 9 * * 1", "timezone": "UTC"},
        enabled=True,
    )
    task, _ = task_services.task_create(task_id=uuid.uuid4(), conversation_id=conversation.id, data=data)
    turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="Remember this.")
    proposal = WriteProposal.objects.create(
        conversation_id=conversation.id,
        turn_id=turn.id,
        tool_call_id="call-1",
        tool="remember",
        input={"content": "The owner reads at night."},
        readback={"title": "Remember a new fact", "lines": ["The owner reads at night."]},
    )
    # A loopback port nothing listens on: its test answers `ok` false at once.
    destination = notification_services.destination_create(url="json://127.0.0.1:9/hook", label="Loopback")
    blob = tmp_dir() / "upload-conformance"
    blob.write_bytes(b"The reading list.\n")
    digest = hashlib.sha256(blob.read_bytes()).hexdigest()
    upload = Upload(blob, "list.txt", MediaType.TEXT, blob.stat().st_size, digest)
    attachment = attachment_services.attachment_create(conversation_id=conversation.id, upload=upload)
    return {
        "destination_id": str(destination.id),
        "attachment_id": str(attachment.id),
        "conversation_id": str(conversation.id),
        "fact_id": str(fact.id),
        "task_id": str(task.id),
        "proposal_id": str(proposal.id),
    }


@pytest.fixture
def owner_session(owner) -> None:
    """The owner signed in through the sign-in page, under SESSION_KEY."""
    signed_in = signed_in_client(owner).cookies[settings.SESSION_COOKIE_NAME].value
    assert Session.objects.filter(session_key=signed_in).update(session_key=SESSION_KEY) == 1


@pytest.fixture
def answers(request) -> Iterator[list[int]]:
    """The statuses one operation answered; afterwards, proof that it was exercised as the owner."""
    statuses: list[int] = []
    yield statuses
    label = request.node.name
    assert statuses, f"{label}: no request was sent"
    assert any(status not in (401, 403) for status in statuses), f"{label}: every request was refused: {statuses}"
    if not any(label.endswith(f"[{operation}]") for operation in NO_SUCCESS_EXPECTED):
        assert any(200 <= status < 300 for status in statuses), f"{label}: never succeeded: {sorted(set(statuses))}"


def test_it_tests_the_document_the_owner_is_served(owner_client):
    served = yaml.safe_load(owner_client.get("/api/schema/").content)

    assert json.loads(json.dumps(served, default=str)) == DOCUMENT
    assert {result.ok().label for result in SCHEMA.get_all_operations()} == OPERATIONS


@SCHEMA.parametrize()
@hypothesis_settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_every_operation_answers_as_its_schema_says(case, owner_session, existing, fake_providers, answers):
    answers.append(case.call_and_validate().status_code)
    known = {name: existing[name] for name in case.path_parameters or {} if name in existing}
    if known and case.meta is not None and case.meta.generation.mode.is_positive:
        case.path_parameters = {**case.path_parameters, **known}
        answers.append(case.call_and_validate().status_code)
