"""One object per event loop: the engine's batchers, publisher and SDK clients rely on it."""

from __future__ import annotations

import asyncio
import gc

import pytest

from flarebot.core.loops import PerLoop


class Thing:
    pass


def test_each_loop_gets_its_own_object_and_keeps_it() -> None:
    per_loop: PerLoop[Thing] = PerLoop(Thing)

    async def twice() -> tuple[Thing, Thing]:
        return per_loop.get(), per_loop.get()

    first_a, first_b = asyncio.run(twice())
    second_a, _ = asyncio.run(twice())
    assert first_a is first_b
    assert second_a is not first_a


def test_an_installed_object_is_the_loops_and_take_removes_it() -> None:
    per_loop: PerLoop[Thing] = PerLoop(Thing)
    mine = Thing()

    async def run() -> None:
        per_loop.install(asyncio.get_running_loop(), mine)
        assert per_loop.get() is mine
        assert per_loop.take() is mine
        assert per_loop.take() is None
        assert per_loop.get() is not mine  # made afresh after it was taken

    asyncio.run(run())


def test_outside_a_running_loop_it_refuses() -> None:
    per_loop: PerLoop[Thing] = PerLoop(Thing)
    with pytest.raises(RuntimeError):
        per_loop.get()


def test_a_closed_loop_takes_its_object_with_it() -> None:
    per_loop: PerLoop[Thing] = PerLoop(Thing)
    loop = asyncio.new_event_loop()

    async def make() -> None:
        per_loop.get()

    loop.run_until_complete(make())
    assert len(per_loop._objects) == 1
    loop.close()
    del loop
    gc.collect()
    assert len(per_loop._objects) == 0
