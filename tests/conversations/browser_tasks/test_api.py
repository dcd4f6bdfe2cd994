"""The browser task routes: list, start, and the agent's cancel, exactly as PROTOCOL.md describes them."""

from __future__ import annotations

import json
import uuid

import pytest

from conversations.browser_tasks import services
from conversations.browser_tasks.services import Reply
from conversations.models import BrowserTask, BrowserTaskProposal, Event
from conversations.services import conversation_create
from conversations.turns import turn_submit
from tests.conversations.test_api import assert_error
from tests.support.browser_tasks import paused_task

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = "/api/agent/"


def tasks_path(conversation_id: object) -> str:
    return f"/api/conversations/{conversation_id}/browser-tasks/"


@pytest.fixture
def conversation(owner):
    return conversation_create(name="Shopping").id


def propose(conversation_id):
    from tests.conversations.browser_tasks.test_services import propose as propose_one

    return propose_one(conversation_id)


def post(client, path, body):
    return client.post(path, json.dumps(body), content_type="application/json")


def delete(client, path, body):
    return client.delete(path, json.dumps(body), content_type="application/json")


def test_it_starts_a_proposal_with_202_and_lists_it(owner_client, conversation):
    proposal = propose(conversation)

    response = post(owner_client, tasks_path(conversation), {"proposal_id": str(proposal.id)})

    assert response.status_code == 202
    assert response["Cache-Control"] == "no-store"
    task = BrowserTask.objects.get()
    assert response.json() == {"task_id": str(task.id), "status": "running"}
    listed = owner_client.get(tasks_path(conversation))
    assert listed.status_code == 200
    assert listed["Cache-Control"] == "no-store"
    body = listed.json()
    [item] = body["tasks"]
    assert item["task_id"] == str(task.id)
    assert (item["status"], item["goal"], item["start_url"], item["restrictions"]) == (
        "running",
        proposal.goal,
        proposal.start_url,
        proposal.restrictions,
    )
    assert (item["open_critical_point"], item["finished_at"], item["proposal_id"]) == (None, None, str(proposal.id))
    [listed_proposal] = body["proposals"]
    assert {k: v for k, v in listed_proposal.items() if k != "created_at"} == {
        "proposal_id": str(proposal.id),
        "status": "started",
        "goal": proposal.goal,
        "start_url": proposal.start_url,
        "restrictions": proposal.restrictions,
        "corrects_task_id": None,
        "carried_restrictions": [],
    }
    assert (item["steps"], item["questions"]) == ([], [])
    assert body["last_sequence"] == Event.objects.filter(conversation_id=conversation).count()


def test_the_list_shows_the_open_critical_point(owner_client, conversation):
    _task, point = paused_task(conversation, kind="question", question="Which colour?")

    [item] = owner_client.get(tasks_path(conversation)).json()["tasks"]

    assert item["status"] == "paused"
    assert item["open_critical_point"]["critical_point_id"] == str(point.id)
    assert (item["open_critical_point"]["kind"], item["open_critical_point"]["question"]) == (
        "question",
        "Which colour?",
    )


def test_a_superseded_proposal_is_refused_with_409(owner_client, conversation):
    old = propose(conversation)
    propose(conversation)

    response = post(owner_client, tasks_path(conversation), {"proposal_id": str(old.id)})

    assert_error(response, 409, "proposal_superseded")
    assert not BrowserTask.objects.exists()


def test_a_correction_of_a_running_task_is_refused_with_409(owner_client, conversation):
    task, point = paused_task(conversation)
    newer = propose(conversation)
    services.critical_point_answer(conversation_id=conversation, reply=Reply(str(point.id), response="Small."))

    assert_error(post(owner_client, tasks_path(conversation), {"proposal_id": str(newer.id)}), 409, "task_unfinished")
    assert BrowserTaskProposal.objects.get(id=newer.id).state == "proposed"
    assert BrowserTask.objects.get(id=task.id).status == "running"


def test_a_correction_of_a_paused_task_supersedes_it_with_202(owner_client, conversation):
    task, _ = paused_task(conversation)
    newer = propose(conversation)

    response = post(owner_client, tasks_path(conversation), {"proposal_id": str(newer.id)})

    assert response.status_code == 202
    listed = {t["task_id"]: t for t in owner_client.get(tasks_path(conversation)).json()["tasks"]}
    assert listed[str(task.id)]["status"] == "superseded"
    assert listed[response.json()["task_id"]]["status"] == "running"
    [correction] = [p for p in owner_client.get(tasks_path(conversation)).json()["proposals"] if p["corrects_task_id"]]
    assert correction["carried_restrictions"] == ["At most 30 EUR."]


@pytest.mark.parametrize(
    "body",
    [{}, {"proposal_id": 5}, {"proposal_id": "nope"}, {"proposal_id": str(uuid.uuid4()).upper() + "x"}, [], "x"],
)
def test_a_malformed_start_is_refused_with_400(owner_client, conversation, body):
    propose(conversation)

    assert_error(post(owner_client, tasks_path(conversation), body), 400)
    assert not BrowserTask.objects.exists()


def test_extra_fields_are_refused(owner_client, conversation):
    proposal = propose(conversation)

    assert_error(post(owner_client, tasks_path(conversation), {"proposal_id": str(proposal.id), "goal": "x"}), 400)
    assert not BrowserTask.objects.exists()


def test_unknown_conversations_and_proposals_are_404(owner_client, conversation):
    proposal = propose(conversation)
    other = conversation_create(name="Other").id

    assert_error(owner_client.get(tasks_path(uuid.uuid4())), 404)
    assert_error(post(owner_client, tasks_path(other), {"proposal_id": str(proposal.id)}), 404, "proposal_not_found")
    assert_error(post(owner_client, tasks_path(uuid.uuid4()), {"proposal_id": str(proposal.id)}), 404)
    assert not BrowserTask.objects.exists()


def test_the_routes_need_the_owner(anonymous_client, conversation):
    proposal = propose(conversation)

    assert_error(anonymous_client.get(tasks_path(conversation)), 401)
    assert_error(post(anonymous_client, tasks_path(conversation), {"proposal_id": str(proposal.id)}), 401)
    assert_error(delete(anonymous_client, AGENT, {"session_id": str(conversation)}), 401)
    assert not BrowserTask.objects.exists()


def test_delete_agent_cancels_the_unfinished_task_then_answers_404(owner_client, conversation):
    task, _ = paused_task(conversation)

    response = delete(owner_client, AGENT, {"session_id": str(conversation)})

    assert response.status_code == 202
    assert response.json() == {"turn_id": None, "task_id": str(task.id)}
    assert BrowserTask.objects.get(id=task.id).status == "cancelled"
    assert_error(delete(owner_client, AGENT, {"session_id": str(conversation)}), 404, "nothing_unfinished")


def test_delete_agent_stops_the_active_turn_too(owner_client, conversation):
    turn, _ = turn_submit(conversation_id=conversation, request_id=uuid.uuid4(), text="Hello")

    response = delete(owner_client, AGENT, {"session_id": str(conversation)})

    assert response.status_code == 202
    assert response.json() == {"turn_id": str(turn.id), "task_id": None}


@pytest.mark.parametrize("body", [{}, {"session_id": "x"}, {"session_id": 1}, {"session_id": None}, {"x": 1}, []])
def test_delete_agent_refuses_a_malformed_body(owner_client, conversation, body):
    task, _ = paused_task(conversation)

    assert_error(delete(owner_client, AGENT, body), 400)
    assert BrowserTask.objects.get(id=task.id).status == "paused"


def test_delete_agent_of_an_unknown_conversation_is_404(owner_client, conversation):
    assert_error(delete(owner_client, AGENT, {"session_id": str(uuid.uuid4())}), 404)
