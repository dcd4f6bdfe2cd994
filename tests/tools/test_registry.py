"""A tool declaration is checked when it is made: a tool the engine could not bound is refused."""

from __future__ import annotations

from typing import Any

import pytest

from tools.registry import MAX_DEADLINE, OUTPUT_LIMIT, OUTPUT_LIMIT_MIN, Effect, Tool, ToolDeclarationError

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


async def run(context: Any, data: dict[str, Any]) -> None:
    return None


def declare(**changes: Any) -> Tool:
    fields: dict[str, Any] = {
        "name": "search",
        "description": "Search.",
        "input_schema": SCHEMA,
        "run": run,
        "deadline": 10,
        "effect": Effect.READ,
    }
    return Tool(**{**fields, **changes})


def test_it_accepts_the_edges_of_every_bound():
    assert declare(deadline=MAX_DEADLINE).deadline == MAX_DEADLINE
    assert declare(output_limit=OUTPUT_LIMIT).output_limit == OUTPUT_LIMIT
    assert declare(output_limit=OUTPUT_LIMIT_MIN).output_limit == OUTPUT_LIMIT_MIN
    assert declare(concurrency=1).concurrency == 1


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"deadline": 0}, "deadline"),
        ({"deadline": MAX_DEADLINE + 0.001}, "deadline"),
        ({"deadline": float("inf")}, "deadline"),
        ({"effect": "read"}, "effect"),
        ({"concurrency": 0}, "concurrency"),
        ({"output_limit": OUTPUT_LIMIT + 1}, "output_limit"),
        ({"output_limit": OUTPUT_LIMIT_MIN - 1}, "output_limit"),
        ({"input_schema": {"type": "objekt"}}, "invalid input schema"),
        ({"input_schema": {"type": "string"}}, "must describe an object"),
        ({"name": "Search"}, "name"),
        ({"name": "a" * 65}, "name"),
    ],
)
def test_it_refuses_a_declaration_the_engine_could_not_enforce(changes, says):
    with pytest.raises(ToolDeclarationError, match=says):
        declare(**changes)


def test_it_compiles_the_input_schema_once():
    tool = declare()
    assert list(tool.validator.iter_errors({"q": "x"})) == []
    assert [e.message for e in tool.validator.iter_errors({"q": 1})] == ["1 is not of type 'string'"]
