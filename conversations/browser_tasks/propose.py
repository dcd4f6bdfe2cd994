"""The chat tool `browser_task_propose`: the model proposes a browser task; only the owner starts it."""

from __future__ import annotations

from typing import Any

from conversations.browser_tasks.services import (
    GOAL_MAX,
    RESTRICTION_MAX,
    RESTRICTIONS_MAX,
    START_URL_MAX,
    browser_task_propose,
)
from flarebot.core.database import db
from flarebot.core.errors import FlarebotError
from tools.kit import card_summary, object_schema, refused
from tools.registry import Effect, Tool, ToolContext, ToolFailed

INPUT_SCHEMA = object_schema(
    {
        "goal": {
            "type": "string",
            "minLength": 1,
            "maxLength": GOAL_MAX,
            "description": "What the browser task must achieve, self-contained, in the owner's terms.",
        },
        "start_url": {
            "type": "string",
            "minLength": 1,
            "maxLength": START_URL_MAX,
            "description": "The http(s) page the task starts on.",
        },
        "restrictions": {
            "type": "array",
            "maxItems": RESTRICTIONS_MAX,
            "items": {"type": "string", "minLength": 1, "maxLength": RESTRICTION_MAX},
            "description": "Every limit the owner set (budget, dates, what not to do), each as one short sentence.",
        },
    }
)


CORRECTION_MESSAGE = (
    "Proposed as a correction of this conversation's unfinished browser task; not started. Every restriction of "
    "that task was carried over (carried_restrictions) and stays; `restrictions` is the full list the task will "
    "keep. The owner sees the readback, carried restrictions marked, and starts it with Start: if the unfinished "
    "task is paused, it ends as superseded (its steps stay on its card) and the corrected task continues on its "
    "page when the start URL is on the same site, else on the start URL; while it is running, Start is refused "
    "until it pauses. Tell the owner to check the readback; do not claim the task runs."
)


async def propose(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
    """Store the proposal and show the owner its readback; nothing starts."""
    try:
        proposal = await db(browser_task_propose)(
            conversation_id=context.conversation_id,
            turn_id=context.turn_id,
            tool_call_id=context.tool_call_id,
            goal=data["goal"],
            start_url=data["start_url"],
            restrictions=list(data["restrictions"]),
        )
    except FlarebotError as error:
        if error.code == "invalid_proposal":
            return refused(error)
        raise ToolFailed(error.message) from None
    if proposal.corrects_id is None:
        return {
            "ok": True,
            "proposal_id": str(proposal.id),
            "status": "proposed",
            "message": (
                "Proposed, not started. The owner sees a readback of the goal, start URL and restrictions and "
                "starts it with Start, or dismisses it. Tell the owner to check the readback; do not claim the "
                "task runs."
            ),
        }
    return {
        "ok": True,
        "proposal_id": str(proposal.id),
        "status": "proposed",
        "corrects_task_id": str(proposal.corrects_id),
        "restrictions": list(proposal.restrictions),
        "carried_restrictions": list(proposal.restrictions[: proposal.carried]),
        "message": CORRECTION_MESSAGE,
    }


BROWSER_TASK_PROPOSE = Tool(
    name="browser_task_propose",
    description=(
        "Propose a multi-step browser task carried out on the owner's behalf (shopping, booking, filling a "
        "form). It starts nothing: the owner reads the goal, start URL and restrictions back and starts it "
        "themselves. Include every restriction the owner gave. To correct the conversation's unfinished task "
        "(the owner changes criteria or wants something else while it waits), propose again with the corrected "
        "goal: its restrictions are carried over by themselves and cannot be dropped (add any new ones), and "
        "Start replaces the paused task, continuing on its page. The task stops and asks the owner before "
        "anything that buys, sends, books, deletes or signs in."
    ),
    input_schema=INPUT_SCHEMA,
    run=propose,
    deadline=15.0,
    effect=Effect.EFFECT,
    label="Proposing a browser task",
    summarize=card_summary(lambda _: "Waiting for your Start"),
)
