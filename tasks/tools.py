"""The task tools the model may call on the current conversation's tasks.

`create_task`, `update_task` and `delete_task` are effects, `list_tasks` a read. They
validate with the same services as the API. `create_task` makes the task's id from the
conversation and the tool call id, so a call replayed after a lost reply finds its task
(or its tombstone) and creates nothing again. What the tasks refuse comes back as
`{"ok": false, "error", "message", ...}`, in the words the Settings page shows, with the
field a refusal is about in `fields` (and the task as it is now for a stale version). A
card shows the task's name and its next run in the task's own zone.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from flarebot.core.database import db
from flarebot.core.errors import FlarebotError
from tasks import selectors, services
from tasks.models import Task
from tasks.schedule import CRON_MAX
from tools.kit import (
    call_check,
    card_summary,
    count_of,
    id_of,
    id_property,
    object_schema,
    refused,
    stopped_check,
    version_property,
)
from tools.proposals import Readback, readback_of, write_propose
from tools.registry import Effect, Tool, ToolContext

DEADLINE = 15.0
# The ids of tasks that `create_task` calls make: uuid5 of this namespace and "conversation:call".
CREATE_NAMESPACE = uuid.UUID("6f1d2b8e-3c4a-4e7f-8b1d-2a9c5e7f1b3d")

_SCHEDULE = {
    "type": "object",
    "description": (
        'Either {"kind": "once", "at": "2096-02-29T09:30:00Z", "timezone": "Europe/Berlin"} (a future instant, '
        "whole seconds, Z or an offset; the zone the owner reads it in, default UTC) "
        'or {"kind": "cron", "expression": "0 9 * * 1", "timezone": "Europe/Berlin"}: five fields '
        "(minute hour day-of-month month day-of-week; numbers, *, lists, ranges, steps on * or a range; "
        "month and day names such as JAN-MAR and MON-FRI; or @hourly, @daily, @weekly, @monthly, @yearly; "
        f"no seconds; at most {CRON_MAX} characters) read as wall-clock times of the IANA zone "
        "(default UTC). Ask the owner for their zone when it matters."
    ),
}
_ID = id_property("The task's id, as list_tasks gave it.")
_VERSION = version_property("task")
_NAME = {"type": "string", "description": f"A short name, at most {services.NAME_MAX} characters."}
_INSTRUCTIONS = {
    "type": "string",
    "description": (
        "What to do at each run, written as the owner's message to you; it is sent to this conversation "
        f"as a user message. At most {services.INSTRUCTIONS_MAX:,} characters."
    ),
}
_ENABLED = {"type": "boolean", "description": "Whether it runs on its schedule (default true)."}


def create_id(*, conversation_id: uuid.UUID, tool_call_id: str) -> uuid.UUID:
    """Return the id of the task a `create_task` call makes: the same for every replay of the call."""
    return uuid.uuid5(CREATE_NAMESPACE, f"{conversation_id}:{tool_call_id}")


def _task(task: Task) -> dict[str, Any]:
    view = selectors.task_view(task)
    return {
        "id": view["id"],
        "name": view["name"],
        "instructions": view["instructions"],
        "schedule": view["schedule"],
        "schedule_text": view["schedule_text"],
        "enabled": view["enabled"],
        "version": view["version"],
        "next_run_at": view["next_run_at"],
        "upcoming": view["upcoming"],
        "scheduling_error": view["scheduling_error"],
    }


def _refused(error: FlarebotError) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    current = error.extra.get("current")
    if isinstance(current, dict):
        extra["current"] = {k: current[k] for k in ("id", "name", "schedule", "enabled", "version") if k in current}
    fields = error.extra.get("fields")
    if isinstance(fields, dict):
        extra["fields"] = fields
    if error.code == "task_limit":
        extra["limit"] = services.MAX_TASKS
    return refused(error, **extra)


def _create(*, conversation_id: uuid.UUID, tool_call_id: str, data: dict[str, Any]) -> dict[str, Any]:
    task_id = create_id(conversation_id=conversation_id, tool_call_id=tool_call_id)
    cleaned = services.task_input_clean(
        name=data["name"],
        instructions=data["instructions"],
        schedule=data["schedule"],
        enabled=data.get("enabled", True),
    )
    task, created = services.task_create(task_id=task_id, conversation_id=conversation_id, data=cleaned)
    return {"ok": True, "task": _task(task), "replayed": not created}


def _list(context: ToolContext) -> dict[str, Any]:
    tasks = selectors.task_list(conversation_id=context.conversation_id)
    return {"ok": True, "tasks": [_task(task) for task in tasks]}


async def list_tasks(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
    return await db(_list)(context)


def _update(*, conversation_id: uuid.UUID, data: dict[str, Any], **_: Any) -> dict[str, Any]:
    task_id = id_of(data)
    # Fields left out keep their current value; the update itself compares the version.
    current = selectors.task_view(selectors.task_get(task_id=task_id, conversation_id=conversation_id))
    task = services.task_update(
        task_id=task_id,
        expected_version=data["expected_version"],
        name=data.get("name", current["name"]),
        instructions=data.get("instructions", current["instructions"]),
        schedule=data.get("schedule", current["schedule"]),
        enabled=data.get("enabled", current["enabled"]),
        conversation_id=conversation_id,
    )
    return {"ok": True, "task": _task(task)}


def _delete(*, conversation_id: uuid.UUID, data: dict[str, Any], **_: Any) -> dict[str, Any]:
    deleted = services.task_delete(
        task_id=id_of(data), expected_version=data["expected_version"], conversation_id=conversation_id
    )
    return {"ok": True, "id": data["id"], "deleted": True, "was_present": deleted}


_WRITES: dict[str, Callable[..., dict[str, Any]]] = {
    "create_task": _create,
    "update_task": _update,
    "delete_task": _delete,
}


def _schedule_words(schedule: Any) -> str:
    if isinstance(schedule, dict) and schedule.get("kind") == "cron":
        return f"Schedule: {schedule.get('expression')} ({schedule.get('timezone', 'UTC')})"
    if isinstance(schedule, dict) and schedule.get("kind") == "once":
        return f"Once at {schedule.get('at')}"
    return "Schedule: unchanged"


def _readback(tool: str, conversation_id: uuid.UUID, data: dict[str, Any]) -> Readback:
    """What the owner's card shows of a proposed write: the task as it would be, never less."""
    if tool == "create_task":
        enabled = "runs on its schedule" if data.get("enabled", True) else "created disabled"
        lines = [f"Name: {data['name']}", _schedule_words(data["schedule"]), f"Instructions: {data['instructions']}"]
        return readback_of("Create a scheduled task", [*lines, enabled.capitalize()])
    try:
        current = selectors.task_view(selectors.task_get(task_id=id_of(data), conversation_id=conversation_id))
        name = current["name"]
    except FlarebotError:
        name = "(no such task)"
    if tool == "delete_task":
        return readback_of("Delete a scheduled task", [f"Name: {name}"])
    lines = [f"Task: {name}"]
    if "name" in data:
        lines.append(f"New name: {data['name']}")
    if "schedule" in data:
        lines.append(_schedule_words(data["schedule"]))
    if "instructions" in data:
        lines.append(f"New instructions: {data['instructions']}")
    if "enabled" in data:
        lines.append("Runs on its schedule" if data["enabled"] else "Disabled")
    return readback_of("Change a scheduled task", lines)


def _write_now(tool: str, context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
    call_check(context, nothing_was="changed")
    return _WRITES[tool](conversation_id=context.conversation_id, tool_call_id=context.tool_call_id, data=data)


async def _tool_write(tool: str, context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
    """Write now, or, when the conversation holds untrusted content, propose it to the owner."""
    stopped_check(context, nothing_was="changed")
    try:
        if await db(context.untrusted_read)():
            if tool == "create_task":
                await db(services.task_input_clean)(
                    name=data["name"],
                    instructions=data["instructions"],
                    schedule=data["schedule"],
                    enabled=data.get("enabled", True),
                )
            readback = await db(_readback)(tool, context.conversation_id, data)
            return await write_propose(context, tool=tool, data=data, readback=readback)
        return await db(_write_now)(tool, context, data)
    except FlarebotError as error:
        return _refused(error)


def _confirmed(tool: str) -> Any:
    def execute(*, conversation_id: uuid.UUID, tool_call_id: str, data: dict[str, Any]) -> dict[str, Any]:
        try:
            return _WRITES[tool](conversation_id=conversation_id, tool_call_id=tool_call_id, data=data)
        except FlarebotError as error:
            return _refused(error)

    return execute


def _when(task: dict[str, Any]) -> str:
    """The task's next run as the owner reads it: in the task's zone."""
    at = task.get("next_run_at")
    if not isinstance(at, str):
        return "no next run"
    schedule = task.get("schedule") or {}
    zone = schedule.get("timezone", "UTC") if isinstance(schedule, dict) else "UTC"
    try:
        local = datetime.fromisoformat(at.replace("Z", "+00:00")).astimezone(ZoneInfo(zone))
    except (ValueError, KeyError):
        return "next run " + at
    return f"next run {local:%a %d %b %Y, %H:%M} {zone}"


_FAILED = {
    "invalid_schedule": "Not saved: the schedule is not valid",
    "invalid_task": "Not saved: the name or instructions are not valid",
    "task_limit": f"Not created: {services.MAX_TASKS} tasks already",
    "version_conflict": "Not changed: the task was changed elsewhere",
    "not_found": "Not changed: no such task in this conversation",
    "id_conflict": "Not created: this call's task was deleted",
    "conversation_not_found": "Not created: this conversation is gone",
}


def _summary(done: str) -> Any:
    def success(output: dict[str, Any]) -> str:
        if isinstance(output.get("tasks"), list):
            return count_of(len(output["tasks"]), "task") + " in this conversation"
        if output.get("was_present") is False:
            return "Already deleted"
        task = output.get("task")
        if isinstance(task, dict):
            return f"{done} “{str(task.get('name', ''))[:80]}”, {_when(task)}"
        return done

    return card_summary(success, failed=_FAILED)


def _write_tool(name: str, description: str, schema: dict[str, Any], label: str, done: str, limit: int) -> Tool:
    """Declare one of the three writes: an effect, proposed to the owner in a conversation that read the web."""

    async def run(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        return await _tool_write(name, context, data)

    return Tool(
        name,
        description,
        schema,
        run,
        deadline=DEADLINE,
        effect=Effect.EFFECT,
        label=label,
        summarize=_summary(done),
        output_limit=limit,
        write_confirmed=_confirmed(name),
    )


TOOLS = [
    _write_tool(
        "create_task",
        "Schedule a task in this conversation: at each occurrence its instructions are sent here as the owner's "
        "message and you answer them, with your tools, while nobody needs to be connected. "
        f"At most {services.MAX_TASKS} tasks.",
        object_schema(
            {"name": _NAME, "instructions": _INSTRUCTIONS, "schedule": _SCHEDULE, "enabled": _ENABLED},
            required=["name", "instructions", "schedule"],
        ),
        "Schedule a task",
        "Scheduled",
        16 * 1024,
    ),
    Tool(
        "list_tasks",
        "List this conversation's scheduled tasks with their id, version, schedule and next runs.",
        object_schema({}),
        list_tasks,
        deadline=DEADLINE,
        effect=Effect.READ,
        label="List scheduled tasks",
        summarize=_summary("Listed tasks"),
        output_limit=64 * 1024,
    ),
    _write_tool(
        "update_task",
        "Change a scheduled task of this conversation. Give its id and the version you last saw; fields you "
        "leave out keep their value. A one-off that ran needs a new future instant to run again.",
        object_schema(
            {
                "id": _ID,
                "expected_version": _VERSION,
                "name": _NAME,
                "instructions": _INSTRUCTIONS,
                "schedule": _SCHEDULE,
                "enabled": _ENABLED,
            },
            required=["id", "expected_version"],
        ),
        "Change a scheduled task",
        "Changed",
        16 * 1024,
    ),
    _write_tool(
        "delete_task",
        "Delete a scheduled task of this conversation for good (its run history too; the transcript stays). "
        "Give its id and the version you last saw.",
        object_schema({"id": _ID, "expected_version": _VERSION}),
        "Delete a scheduled task",
        "Deleted a task",
        8 * 1024,
    ),
]
