"""Helpers of the tasks tests: a conversation to target, and task bodies as the contract writes them."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.test import Client

from conversations.models import Conversation
from conversations.services import conversation_create

LIST = "/api/tasks/"


@pytest.fixture
def conversation(db: None) -> Conversation:
    return conversation_create(name="Reports")


def detail(task_id: object) -> str:
    return f"{LIST}{task_id}/"


def runs_url(task_id: object) -> str:
    return f"{LIST}{task_id}/runs/"


def body(conversation: Conversation | uuid.UUID, **overrides: Any) -> dict[str, Any]:
    conversation_id = conversation.id if isinstance(conversation, Conversation) else conversation
    return {
        "id": str(uuid.uuid4()),
        "conversation_id": str(conversation_id),
        "name": "Weekly summary",
        "instructions": "Summarise what I asked you this week.",
        "schedule": {"kind": "cron", "expression": "0 9 * * 1", "timezone": "Europe/Berlin"},
        "enabled": True,
        **overrides,
    }


def send(client: Client, method: str, path: str, data: object = None, **kwargs: Any):
    if data is None:
        return getattr(client, method)(path, **kwargs)
    return getattr(client, method)(path, json.dumps(data), content_type="application/json", **kwargs)


def create(client: Client, data: dict[str, Any]) -> dict[str, Any]:
    response = send(client, "post", LIST, data)
    assert response.status_code == 201, response.content
    return response.json()


def edit(task: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    return {
        "expected_version": task["version"],
        "name": task["name"],
        "instructions": task["instructions"],
        "schedule": task["schedule"],
        "enabled": task["enabled"],
        **overrides,
    }


def assert_error(response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Cache-Control"] == "no-store"
    error = response.json()["error"]
    assert isinstance(error["message"], str)
    assert error["message"]
    if code is not None:
        assert error["code"] == code, error
    return error
