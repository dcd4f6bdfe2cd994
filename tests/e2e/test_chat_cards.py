"""What a finished tool card says, in Chromium against the live stack (the shell runs in Docker).

Folded, a card that succeeded says what came of it in its summary's words; open, its body
says it, once. A label in the progressive ("Running a shell command") is for a call under way.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.chat_support import last_answer, open_conversation, send, tool_card
from tests.support.fake_providers import Call, FakeProviders, Text
from tests.support.live_clients import OwnerClient

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

TURN_MS = 60_000
WEEKLY = {"kind": "cron", "expression": "0 9 * * 1", "timezone": "Europe/Berlin"}
NEXT_RUN = re.compile(r"^Scheduled “Weekly summary”, next run Mon \d{2} \w{3} \d{4}, 09:00 Europe/Berlin$")


def test_a_finished_shell_card_says_it_ran_and_a_scheduled_task_shows_its_next_run_folded(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    task = {"name": "Weekly summary", "instructions": "Summarise my week.", "schedule": WEEKLY}
    fake_providers.script(
        [Call("toolu_echo", "shell", {"command": "echo hi"}), Call("toolu_task", "create_task", task)],
        [Text("Done, and scheduled.")],
    )
    conversation_id = live_owner.create_conversation("Cards")
    open_conversation(page, conversation_id)

    send(page, "Say hi, then summarise my week every Monday at nine")

    expect(last_answer(page)).to_contain_text("Done, and scheduled.", timeout=TURN_MS)
    shell, scheduled = tool_card(page, "toolu_echo"), tool_card(page, "toolu_task")
    for _ in range(2):  # as the turn showed them, then from the stored transcript
        expect(shell).to_have_attribute("data-status", "succeeded")
        expect(shell.locator(".tool-label")).to_have_text("Ran a shell command")
        expect(shell.locator(".tool-status")).to_have_text("Done")
        expect(shell.locator(".tool-outcome")).to_have_text("Exit code 0")
        shell.locator("summary").click()
        expect(shell.locator(".tool-stdout")).to_have_text("hi\n")
        expect(shell.locator(".tool-outcome")).to_be_hidden()
        assert re.findall("exit code 0", shell.inner_text(), re.IGNORECASE) == ["Exit code 0"]

        expect(scheduled.locator(".tool-label")).to_have_text("Schedule a task")
        expect(scheduled.locator(".tool-outcome")).to_have_text(NEXT_RUN)
        expect(scheduled.locator(".tool-outcome")).to_be_visible()  # folded

        page.reload()
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
