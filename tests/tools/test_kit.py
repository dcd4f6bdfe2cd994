"""The tool kit: what every tool declares alike, as the model, the card and the write guard meet it."""

from __future__ import annotations

import uuid

import pytest
from jsonschema import Draft202012Validator

from flarebot.core.errors import Conflict
from tests.support.tool_context import tool_context
from tools.kit import (
    call_check,
    call_wanted,
    card_summary,
    id_of,
    id_property,
    object_schema,
    refusal,
    refused,
    stopped_check,
    version_property,
)
from tools.registry import ToolFailed


def test_an_object_schema_requires_every_property_and_refuses_others():
    validator = Draft202012Validator(object_schema({"a": {"type": "string"}, "b": {"type": "integer"}}))

    assert validator.is_valid({"a": "x", "b": 1})
    assert not validator.is_valid({"a": "x"})
    assert not validator.is_valid({"a": "x", "b": 1, "c": 2})


def test_an_object_schema_requires_only_what_it_is_told():
    validator = Draft202012Validator(object_schema({"a": {"type": "string"}, "b": {"type": "integer"}}, required=["a"]))

    assert validator.is_valid({"a": "x"})
    assert not validator.is_valid({"b": 1})


def test_an_id_is_a_lowercase_uuid_and_parses_back():
    fact_id = uuid.uuid4()
    validator = Draft202012Validator(object_schema({"id": id_property("The id."), "version": version_property("fact")}))

    assert validator.is_valid({"id": str(fact_id), "version": 1})
    assert not validator.is_valid({"id": str(fact_id).upper(), "version": 1})
    assert not validator.is_valid({"id": str(fact_id), "version": 0})
    assert id_of({"id": str(fact_id)}) == fact_id


def test_a_refusal_carries_its_code_message_and_extras():
    assert refusal("too_long", "Shorter, please.", limit=3) == {
        "ok": False,
        "error": "too_long",
        "message": "Shorter, please.",
        "limit": 3,
    }
    assert refused(Conflict("Changed elsewhere.", code="version_conflict")) == {
        "ok": False,
        "error": "version_conflict",
        "message": "Changed elsewhere.",
    }


def test_a_card_summary_shows_a_refusal_in_its_tables_words_and_never_its_message():
    summarize = card_summary(lambda output: "Done", failed={"too_long": "Not stored: too long"})

    assert summarize({"ok": True}) == "Done"
    assert summarize(refusal("too_long", "the secret text")) == "Not stored: too long"
    assert summarize(refusal("needs_confirmation", "the secret text")) == "Waiting for your confirmation"
    assert summarize(refusal("other", "the secret text")) == "Not done"
    assert summarize("not a result") == ""


def test_a_card_summary_without_a_table_shows_the_refusals_own_message():
    summarize = card_summary(lambda output: "Done")

    message = "The page did not arrive within 15 s."
    assert summarize(refusal("timeout", message)) == message


def test_the_write_guard_stops_a_cancelled_call_and_one_of_a_conversation_being_deleted():
    live = tool_context()
    assert call_wanted(live)
    call_check(live, nothing_was="changed")

    deleted = tool_context(live=lambda: False)
    assert not call_wanted(deleted)
    with pytest.raises(ToolFailed) as failed:
        call_check(deleted, nothing_was="changed")
    assert failed.value.message == "Nothing was changed: this conversation is being deleted."
    stopped_check(deleted, nothing_was="changed")  # the cancel flag alone: no database

    stopped = tool_context()
    stopped.cancelled.set()
    assert not call_wanted(stopped)
    with pytest.raises(ToolFailed) as failed:
        stopped_check(stopped, nothing_was="proposed")
    assert failed.value.message == "Nothing was proposed: the turn was stopped."
