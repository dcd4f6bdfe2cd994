"""A command's first output is kept even when it comes before the engine's answer is read.

On a busy machine the command may write before the worker's thread has read the headers
of the engine's answer to "start the exec"; the reader of those headers then holds that
output too. These tests make every answer's headers wait to be read until the output is
surely there (what a slow thread does now and then), against the real engine.
"""

from __future__ import annotations

import http.client
import time
import uuid

import pytest

from tools.shell.attach import Frames
from tools.shell.sandbox import Sandbox, container_remove, sandbox_scope

pytestmark = pytest.mark.django_db(transaction=True)

LATE = 0.3  # seconds every answer of the engine waits before its headers are read


@pytest.fixture
def late_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    begin = http.client.HTTPResponse.begin

    def late_begin(self: http.client.HTTPResponse) -> None:
        time.sleep(LATE)
        begin(self)

    monkeypatch.setattr(http.client.HTTPResponse, "begin", late_begin)


def run(command: str) -> Sandbox:
    sandbox = Sandbox(lease_id=uuid.uuid4(), command=command, deadline=time.monotonic() + 30, scope=sandbox_scope())
    try:
        sandbox.lifecycle(still_wanted=lambda: True)
    finally:
        assert container_remove(sandbox.name)
    return sandbox


def test_what_a_command_prints_at_once_is_kept_when_the_answer_is_read_late(late_headers: None) -> None:
    sandbox = run("echo started; echo warming up >&2; sleep 1; echo done")

    assert sandbox.exit_code == 0
    assert bytes(sandbox.stdout) == b"started\ndone\n"
    assert bytes(sandbox.stderr) == b"warming up\n"


def test_the_files_of_out_come_back_when_the_answers_are_read_late(late_headers: None) -> None:
    sandbox = run("mkdir -p out && printf 'x,y\\n' > out/a.csv && printf hi > out/b.txt")

    assert sandbox.exit_code == 0
    assert sandbox.returned is not None
    assert sandbox.returned.notes == []
    assert sandbox.returned.files == [("a.csv", b"x,y\n"), ("b.txt", b"hi")]


def test_frames_split_across_reads_come_out_whole_and_in_order() -> None:
    stream = b"\x01\x00\x00\x00\x00\x00\x00\x03abc" + b"\x02\x00\x00\x00\x00\x00\x00\x02de" + b"\x01" + bytes(7)
    frames = Frames()

    got = [*frames.feed(stream[:5]), *frames.feed(stream[5:12]), *frames.feed(stream[12:])]

    assert got == [(1, b"abc"), (2, b"de"), (1, b"")]
