"""Batched calls: calls made while a batch is in flight go together in the next one, and each
keeps its own outcome. The engine's starts, ends, streamed writes and publishes rely on it."""

from __future__ import annotations

import asyncio

import pytest

from flarebot.core.batching import BatchedCalls
from flarebot.core.database import db

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_batched_call_that_fails_reaches_only_its_caller_and_the_next_batch_goes_on():
    seen: list[list[int]] = []

    def halve(numbers):
        seen.append(list(numbers))
        return [ValueError(f"odd: {n}") if n % 2 else n // 2 for n in numbers]

    calls: BatchedCalls[int, int] = BatchedCalls(db(halve), in_flight=1, batch=2)

    outcomes = await asyncio.gather(*(calls.call(n) for n in (2, 3, 4, 6, 8)), return_exceptions=True)

    assert outcomes[0] == 1
    assert outcomes[2:] == [2, 3, 4]
    assert isinstance(outcomes[1], ValueError)
    assert str(outcomes[1]) == "odd: 3"
    # Calls made together went two at a time, one batch after the other, in their order.
    assert seen == [[2, 3], [4, 6], [8]]


async def test_a_call_made_as_the_last_batch_ends_is_not_left_waiting():
    calls: BatchedCalls[int, int] = BatchedCalls(db(lambda numbers: [n * 10 for n in numbers]), in_flight=1, batch=32)

    async def one_then_another() -> list[int]:
        first = await calls.call(1)
        # Made in the step this caller wakes in, before the finished drainer's own callbacks ran.
        return [first, await calls.call(2)]

    assert await asyncio.wait_for(one_then_another(), timeout=30) == [10, 20]
