"""What an attempt of a turn starts from, read in one go from the database."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from conversations.eventlog import events_append, events_publish_sync
from conversations.instructions import instructions_effective
from conversations.model_settings import TurnModel, turn_model_snapshot
from conversations.models import Message, MessageRole, Turn
from conversations.providers.base import INTERRUPTED_OUTPUT
from conversations.turns import Claim


@dataclass
class Prepared:
    model: TurnModel
    system: str
    transcript: list[dict[str, Any]]
    assistant_message_id: uuid.UUID
    parts: list[dict[str, Any]]
    steps: int
    cancel_requested: bool


def attempt_prepare(claim: Claim) -> Prepared:
    """Snapshot settings, instructions and transcript for one attempt of a claimed turn."""
    model = turn_model_snapshot()
    system = instructions_effective()
    with transaction.atomic():
        turn = Turn.objects.get(id=claim.turn_id)
        Turn.objects.filter(id=turn.id).update(provider=model.provider, model=model.model)
        transcript = [
            {"role": role, "parts": parts}
            for role, parts in Message.objects.filter(
                conversation_id=claim.conversation_id, ordinal__lte=2 * claim.ordinal
            )
            .order_by("ordinal")
            .values_list("role", "parts")
        ]
        assistant, _ = Message.objects.get_or_create(
            turn=turn,
            role=MessageRole.ASSISTANT,
            defaults={"conversation_id": claim.conversation_id, "ordinal": 2 * claim.ordinal + 1, "parts": []},
        )
        parts = list(assistant.parts)
        # A tool call cut off by a crash has no output: record that its outcome is unknown,
        # and tell clients that showed it running (tool.started) how it ended.
        cut_off = [p for p in parts if p["type"] == "tool" and p.get("output") is None]
        if cut_off:
            parts = [
                {**p, "output": INTERRUPTED_OUTPUT, "status": "interrupted"}
                if p["type"] == "tool" and p.get("output") is None
                else p
                for p in parts
            ]
            Message.objects.filter(id=assistant.id).update(parts=parts)
            frames = events_append(
                conversation_id=claim.conversation_id,
                events=[
                    (
                        "tool.finished",
                        turn.id,
                        {
                            "tool_call_id": p["tool_call_id"],
                            "name": p["name"],
                            "status": "interrupted",
                            "output": INTERRUPTED_OUTPUT,
                        },
                    )
                    for p in cut_off
                ],
            )
            transaction.on_commit(lambda: events_publish_sync(conversation_id=claim.conversation_id, frames=frames))
    return Prepared(
        model=model,
        system=system,
        transcript=transcript,
        assistant_message_id=assistant.id,
        parts=parts,
        steps=turn.steps,
        cancel_requested=turn.cancel_requested,
    )
