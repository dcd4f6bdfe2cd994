"""The agent's instructions: shipped defaults, or the owner's override of them, then the product's rules.

What the model receives as its system prompt is the owner's instructions (editable,
resettable) followed by the rules Flarebot always applies (`product_rules.txt`: honesty
about tools, untrusted content, citations, browser tasks), which no customisation removes
(`system_prompt`). Every turn attempt reads the current instructions (with its model:
model_settings.turn_model_snapshot); a running attempt keeps its copy.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from conversations.models import InstructionOverride
from flarebot.core.errors import InvalidInput
from flarebot.core.text import has_control_characters, line_breaks_normalize, utf16_length
from flarebot.core.times import iso

MAX_UTF16 = 16_000

DEFAULT_INSTRUCTIONS = (Path(__file__).with_name("default_instructions.txt")).read_text(encoding="utf-8").strip()
PRODUCT_RULES = (Path(__file__).with_name("product_rules.txt")).read_text(encoding="utf-8").strip()


class InstructionsView(TypedDict):
    effective: str
    default: str
    customized: bool
    modified_at: str | None
    rules: str  # an addition: what the model always receives after the instructions, not editable


def system_prompt(instructions: str) -> str:
    """What the model receives: the owner's instructions, then the rules the product always applies."""
    return f"{instructions}\n\n{PRODUCT_RULES}"


def instructions_get() -> InstructionsView:
    """Return the effective instructions, the defaults and whether they are customized."""
    override = InstructionOverride.objects.first()
    return {
        "effective": override.text if override else DEFAULT_INSTRUCTIONS,
        "default": DEFAULT_INSTRUCTIONS,
        "customized": override is not None,
        "modified_at": iso(override.updated_at) if override else None,
        "rules": PRODUCT_RULES,
    }


def instructions_set(*, text: str) -> InstructionsView:
    """Replace the defaults with the owner's text, kept as given but for its line breaks (all `\n`)."""
    text = line_breaks_normalize(text)
    if utf16_length(text) > MAX_UTF16:
        raise InvalidInput(f"text: at most {MAX_UTF16} characters (UTF-16 code units).", code="invalid_instructions")
    if has_control_characters(text, allow="\t\n"):
        raise InvalidInput("text: only tabs and line breaks may be control characters.", code="invalid_instructions")
    if not text.strip():
        raise InvalidInput("text: must not be blank.", code="invalid_instructions")
    InstructionOverride.objects.update_or_create(singleton=True, defaults={"text": text})
    return instructions_get()


def instructions_reset() -> InstructionsView:
    """Go back to the shipped defaults."""
    InstructionOverride.objects.all().delete()
    return instructions_get()
