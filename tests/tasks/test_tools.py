# mypy: disable-error-code="union-attr,arg-type,index,operator,misc"
"""The task tools as the engine calls them: the current conversation's tasks, the API's validation, safe cards."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from conversations.services import conversation_create
from flarebot.core.database import db
from tasks.models import Task, TaskState
from tools.registry import KeyMissing, ToolContext, ToolFailed, tool_get
from tools.runtime import input_problem

pytestmark = pytest.mark.django_db(transaction=True)

WEEKLY = {"kind": "cron", "expression": "0 9 * * 1", "timezone": "Europe/Berlin"}


def context_for(conversation_id: uuid.UUID, tool_call_id: str = "call-1", **overrides: Any) -> ToolContext:
    async def no_progress(progress: dict[str, Any]) -> None:
        return None

    async def no_key(provider: str) -> KeyMissing:
        return KeyMissing("missing", "Add a key in Settings.")

    values: dict[str, Any] = {
        "conversation_id": conversation_id,
        "turn_id": uuid.uuid4(),
        "tool_call_id": tool_call_id,
        "cancelled": asyncio.Event(),
        "report_progress": no_progress,
        "provider_key": no_key,
        "conversation_live": lambda: True,
        "untrusted_read": lambda: False,
    }
    return ToolContext(**{**values, **overrides})


async def call(name: str, context: ToolContext, data: dict[str, Any]) -> Any:
    tool = tool_get(name)
    assert tool is not None
    assert input_problem(tool, data) is None
    return await tool.run(context, data)


def summary(name: str, output: Any) -> str:
    tool = tool_get(name)
    assert tool is not None
    assert tool.summarize is not None
    return tool.summarize(output)


@pytest.fixture
async def conversations() -> tuple[uuid.UUID, uuid.UUID]:
    first = await db(conversation_create)(name="Mine")
    second = await db(conversation_create)(name="Another")
    return first.id, second.id


def test_the_four_tools_are_declared_with_their_effect_classes() -> None:
    declared = {
        name: (tool_get(name).effect.value, tool_get(name).label)
        for name in ("create_task", "list_tasks", "update_task", "delete_task")
    }
    assert declared == {
        "create_task": ("effect", "Schedule a task"),
        "list_tasks": ("read", "List scheduled tasks"),
        "update_task": ("effect", "Change a scheduled task"),
        "delete_task": ("effect", "Delete a scheduled task"),
    }


async def test_create_task_schedules_in_the_current_conversation_once_per_call(conversations) -> None:
    mine, _ = conversations
    data = {"name": "Weekly summary", "instructions": "Summarise my week.", "schedule": WEEKLY}
    result = await call("create_task", context_for(mine), data)
    assert result["ok"] is True
    assert result["replayed"] is False
    task = result["task"]
    assert (task["name"], task["version"], task["schedule"]) == ("Weekly summary", 1, WEEKLY)
    assert task["schedule_text"] == "Every Monday at 09:00, Europe/Berlin"
    assert len(task["upcoming"]) == 5
    stored = await db(lambda: Task.objects.get(id=task["id"]))()
    assert stored.conversation_id == mine
    # The card: the name and the next run in the task's zone, nothing else.
    card = summary("create_task", result)
    assert card.startswith("Scheduled “Weekly summary”, next run Mon ")
    assert card.endswith(" 09:00 Europe/Berlin")
    assert "Summarise" not in card
    replay = await call("create_task", context_for(mine), data)
    assert (replay["replayed"], replay["task"]["id"]) == (True, task["id"])
    assert await db(lambda: Task.objects.count())() == 1


async def test_the_tools_refuse_what_the_api_refuses(conversations) -> None:
    mine, _ = conversations
    bad = [
        {"name": "x", "instructions": "y", "schedule": {"kind": "cron", "expression": "0 9 * * MONDAY"}},
        {"name": "x", "instructions": "y", "schedule": {"kind": "once", "at": "2020-01-01T00:00:00Z"}},
        {"name": "x" * 121, "instructions": "y", "schedule": WEEKLY},
        {"name": "x", "instructions": "y" * 8001, "schedule": WEEKLY},
    ]
    for n, data in enumerate(bad):
        result = await call("create_task", context_for(mine, f"call-{n}"), data)
        assert result["ok"] is False
        assert result["error"] in ("invalid_schedule", "invalid_task")
        assert summary("create_task", result).startswith("Not saved")
    assert await db(lambda: Task.objects.count())() == 0


async def test_the_tools_refuse_in_the_words_the_page_shows_with_the_field_beside(conversations) -> None:
    mine, _ = conversations
    hour = {"kind": "cron", "expression": "0 25 * * *", "timezone": "Europe/Berlin"}
    result = await call("create_task", context_for(mine), {"name": "x", "instructions": "y", "schedule": hour})
    assert result == {
        "ok": False,
        "error": "invalid_schedule",
        "message": "The hour 25 is outside 0-23.",
        "fields": {"schedule.expression": ["The hour 25 is outside 0-23."]},
    }
    created = await call(
        "create_task", context_for(mine, "call-2"), {"name": "x", "instructions": "y", "schedule": WEEKLY}
    )
    blank = await call(
        "update_task", context_for(mine, "call-3"), {"id": created["task"]["id"], "expected_version": 1, "name": " "}
    )
    assert (blank["error"], blank["message"], blank["fields"]) == (
        "invalid_task",
        "The name must not be blank.",
        {"name": ["The name must not be blank."]},
    )
    assert "`" not in str(result) + str(blank)


async def test_list_update_and_delete_reach_only_this_conversations_tasks(conversations) -> None:
    mine, other = conversations
    created = await call("create_task", context_for(mine), {"name": "Mine", "instructions": "a", "schedule": WEEKLY})
    foreign = await call("create_task", context_for(other), {"name": "Theirs", "instructions": "b", "schedule": WEEKLY})
    listed = await call("list_tasks", context_for(mine, "call-2"), {})
    assert [t["name"] for t in listed["tasks"]] == ["Mine"]
    assert summary("list_tasks", listed) == "1 task in this conversation"
    foreign_id = foreign["task"]["id"]
    refused = await call(
        "update_task", context_for(mine, "call-3"), {"id": foreign_id, "expected_version": 1, "name": "Mine now"}
    )
    assert (refused["ok"], refused["error"]) == (False, "not_found")
    gone = await call("delete_task", context_for(mine, "call-4"), {"id": foreign_id, "expected_version": 1})
    assert gone["was_present"] is False
    assert await db(lambda: Task.objects.get(id=foreign_id).state)() == TaskState.ACTIVE
    task_id = created["task"]["id"]
    updated = await call(
        "update_task", context_for(mine, "call-5"), {"id": task_id, "expected_version": 1, "enabled": False}
    )
    assert (updated["task"]["enabled"], updated["task"]["name"], updated["task"]["version"]) == (False, "Mine", 2)
    assert summary("update_task", updated) == "Changed “Mine”, no next run"
    stale = await call("update_task", context_for(mine, "call-6"), {"id": task_id, "expected_version": 1, "name": "x"})
    assert (stale["error"], stale["current"]["version"]) == ("version_conflict", 2)
    deleted = await call("delete_task", context_for(mine, "call-7"), {"id": task_id, "expected_version": 2})
    assert (deleted["ok"], deleted["was_present"]) == (True, True)
    assert summary("delete_task", deleted) == "Deleted a task"
    assert await db(lambda: Task.objects.get(id=task_id).state)() == TaskState.DELETED


async def test_a_stopped_turn_or_a_deleted_conversation_writes_nothing(conversations) -> None:
    mine, _ = conversations
    stopped = asyncio.Event()
    stopped.set()
    data = {"name": "x", "instructions": "y", "schedule": WEEKLY}
    with pytest.raises(ToolFailed):
        await call("create_task", context_for(mine, cancelled=stopped), data)
    with pytest.raises(ToolFailed):
        await call("create_task", context_for(mine, conversation_live=lambda: False), data)
    assert await db(lambda: Task.objects.count())() == 0


async def test_in_a_conversation_that_read_the_web_a_task_change_is_proposed_and_nothing_changes(conversations):
    conversation_id, _ = conversations
    created = await call(
        "create_task",
        context_for(conversation_id),
        {"name": "Water", "instructions": "Water the plants.", "schedule": WEEKLY},
    )
    task = created["task"]
    tainted = context_for(conversation_id, "call-2", untrusted_read=lambda: True)

    update = await call(
        "update_task", tainted, {"id": task["id"], "expected_version": 1, "enabled": False, "name": "Exfiltrate"}
    )
    delete = await call(
        "delete_task",
        context_for(conversation_id, "call-3", untrusted_read=lambda: True),
        {"id": task["id"], "expected_version": 1},
    )

    assert update["proposal"]["readback"] == {
        "title": "Change a scheduled task",
        "lines": ["Task: Water", "New name: Exfiltrate", "Disabled"],
    }
    assert delete["proposal"]["readback"] == {"title": "Delete a scheduled task", "lines": ["Name: Water"]}
    [stored] = await db(lambda: list(Task.objects.all()))()
    assert (stored.name, stored.enabled, stored.version) == ("Water", True, 1)


async def test_a_proposed_task_with_a_bad_schedule_is_refused_at_once(conversations):
    conversation_id, _ = conversations
    tainted = context_for(conversation_id, untrusted_read=lambda: True)

    result = await call(
        "create_task", tainted, {"name": "X", "instructions": "Y", "schedule": {"kind": "cron", "expression": "nope"}}
    )

    assert result["error"] == "invalid_schedule"
    assert "proposal" not in result
