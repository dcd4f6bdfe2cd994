"""The shell tool in the chat page and the System section, in Chromium against the live stack.

The live worker runs the real shell tool against the real Docker engine. One test restarts
it with DOCKER_HOST pointing at a socket that does not exist: the shell must then answer
"unavailable" with the operator's fix at once, the System section must say so, and the
turn must go on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.e2e.chat_support import apply_look, last_answer, no_sideways_scroll, open_conversation, send, tool_card
from tests.e2e.conftest import screenshot
from tests.e2e.test_system_page import row
from tests.support.fake_providers import Call, FakeProviders, Hold, Text
from tests.support.live import LiveStack
from tests.support.live_clients import OwnerClient

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

TURN_MS = 60_000
ABSENT = "unix:///nonexistent/flarebot-test/docker.sock"
WIDTHS = [pytest.param(width, id=f"{width}px") for width in (1280, 375)]
# The theme's colours in the light scheme (base.css): the status of a command that failed is never green.
WARNING = "rgb(161, 98, 7)"
SUCCESS = "rgb(21, 128, 61)"
COMMAND = "printf '<b>bold</b> <img src=x onerror=\"window.pwned=1\">\\n'; echo 'to stderr' >&2; exit 4"


def test_it_shows_the_command_and_its_output_as_text_in_the_card(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    fake_providers.script([Call("toolu_shell", "shell", {"command": COMMAND})], [Text("It printed some markup.")])
    conversation_id = live_owner.create_conversation("Shell")
    open_conversation(page, conversation_id)

    send(page, "Run it")

    card = tool_card(page, "toolu_shell", timeout_ms=TURN_MS)
    expect(card).to_have_attribute("data-status", "succeeded", timeout=TURN_MS)
    expect(card.locator(".tool-label")).to_have_text("Ran a shell command")
    expect(card.locator("summary")).not_to_contain_text("printf")
    expect(last_answer(page)).to_contain_text("It printed some markup.")
    card.locator("summary").click()
    expect(card.locator(".tool-summary")).to_have_text("Exit code 4")
    expect(card.locator(".tool-command")).to_have_text(COMMAND)
    expect(card.locator(".tool-stdout")).to_have_text('<b>bold</b> <img src=x onerror="window.pwned=1">\n')
    expect(card.locator(".tool-stderr")).to_have_text("to stderr\n")
    assert re.findall("exit code 4", card.inner_text(), re.IGNORECASE) == ["Exit code 4"]  # said once
    assert card.locator(".tool-body b, .tool-body img").count() == 0
    assert page.evaluate("window.pwned === undefined")
    screenshot(page, "chat-shell")

    page.reload()
    card = tool_card(page, "toolu_shell")
    card.locator("summary").click()
    expect(card.locator(".tool-stdout")).to_contain_text("<b>bold</b>")


def test_files_the_command_wrote_to_out_show_in_every_tab_as_the_call_ends(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    answering = Hold()  # the model's next answer waits: only the call's end can show the files
    command = "mkdir -p out && printf 'a,b\\n1,2\\n' > out/report.csv"
    fake_providers.script([Call("toolu_files", "shell", {"command": command})], [answering, Text("It is attached.")])
    conversation_id = live_owner.create_conversation("Files back")
    open_conversation(page, conversation_id)
    other = page.context.new_page()
    open_conversation(other, conversation_id)

    send(page, "Make the report")

    try:
        for tab in (page, other):
            chip = tab.locator("#transcript .msg.assistant .file-chip")
            link = chip.get_by_role("link", name="report.csv")
            expect(link).to_have_attribute("href", re.compile(r"^/api/attachments/[0-9a-f-]{36}/$"), timeout=TURN_MS)
            expect(chip.locator(".file-meta")).to_have_text("8 bytes · text/csv")
        expect(page.locator("#stop")).to_be_visible()  # the answer is still being written
    finally:
        answering.release()
    for tab in (page, other):
        expect(last_answer(tab)).to_contain_text("It is attached.", timeout=TURN_MS)
        expect(tab.locator("#transcript .msg.assistant .file-chip")).to_have_count(1)
    other.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_it_says_exited_3_in_the_warning_colour_and_why_failed_calls_failed_without_opening_them(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, width: int
) -> None:
    page = chat_page
    apply_look(page, (width, "light"))
    exited = "echo reading; echo 'cat: data.csv: No such file or directory' >&2; exit 3"
    fake_providers.script(
        [Call("toolu_exit", "shell", {"command": exited}), Call("toolu_empty", "shell", {"command": ""})],
        [Text("The file is missing.")],
    )
    conversation_id = live_owner.create_conversation("Exit codes")
    open_conversation(page, conversation_id)

    send(page, "Read data.csv")

    expect(last_answer(page)).to_contain_text("The file is missing.", timeout=TURN_MS)
    for _ in range(2):  # as the turn showed it, then from the stored transcript
        exit_card = tool_card(page, "toolu_exit")
        expect(exit_card).to_have_attribute("data-status", "succeeded")  # the call worked; the command did not
        expect(exit_card.locator(".tool-status")).to_have_text("Exited 3")
        expect(exit_card.locator(".tool-status")).to_have_css("color", WARNING)
        expect(exit_card.locator(".tool-dot")).to_have_css("background-color", WARNING)
        expect(exit_card.locator(".tool-reason")).to_be_visible()
        expect(exit_card.locator(".tool-reason")).to_have_text("cat: data.csv: No such file or directory")
        expect(exit_card.locator(".tool-body")).to_be_hidden()
        assert exit_card.locator(".tool-status").evaluate("(s) => getComputedStyle(s).color") != SUCCESS
        failed_card = tool_card(page, "toolu_empty")
        expect(failed_card).to_have_attribute("data-status", "failed")
        expect(failed_card.locator(".tool-status")).to_have_text("Failed")
        expect(failed_card.locator(".tool-reason")).to_be_visible()
        expect(failed_card.locator(".tool-reason")).to_have_text(
            "Running a shell command was given input it does not accept; the model was told why."
        )
        expect(failed_card.locator(".tool-body")).to_be_hidden()
        no_sideways_scroll(page)
        screenshot(page, f"chat-shell-exited-{width}")
        page.reload()
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")


# 40 s of output (the test stops it long before), within the longest lifetime of 45 s.
LIVE_COMMAND = 'for i in $(seq 1 200); do echo "line $i"; sleep 0.2; done'
# What the live block shows: its text, whether it sits at its end, and whether it scrolls at all.
LIVE_STATE = """(pre) => ({
    text: pre.textContent,
    atEnd: pre.scrollHeight - pre.scrollTop - pre.clientHeight < 8,
    top: pre.scrollTop,
    overflows: pre.scrollHeight > pre.clientHeight,
})"""


def lines_of(text: str) -> list[int]:
    """The numbers of the command's lines, in the order shown."""
    return [int(line.removeprefix("line ")) for line in text.splitlines()]


def shown_through(pre: Locator, number: int) -> None:
    """Wait until the live block shows the command's line `number`."""
    pre.page.wait_for_function(
        "([pre, n]) => pre.textContent.split('\\n').includes(`line ${n}`)",
        arg=[pre.element_handle(), number],
        timeout=TURN_MS,
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_a_running_commands_output_shows_in_its_card_as_it_comes_and_after_a_reload(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, width: int
) -> None:
    page = chat_page
    apply_look(page, (width, "light"))
    fake_providers.script(
        [Call("toolu_live", "shell", {"command": LIVE_COMMAND, "timeout_seconds": 45})], [Text("Stopped it.")]
    )
    conversation_id = live_owner.create_conversation("Live output")
    open_conversation(page, conversation_id)

    send(page, "Count slowly")

    card = tool_card(page, "toolu_live", timeout_ms=TURN_MS)
    expect(card).to_have_attribute("data-status", "running", timeout=TURN_MS)
    expect(card.locator(".tool-tail")).to_have_text(re.compile(r"^line \d+$"))  # folded, the latest line
    card.locator("summary").click()
    live = card.locator(".tool-live")
    shown_through(live, 20)  # more than the block's height: it scrolls
    state = live.evaluate(LIVE_STATE)
    assert lines_of(state["text"])[:20] == list(range(1, 21))
    assert state["overflows"]
    page.wait_for_function(f"(pre) => ({LIVE_STATE})(pre).atEnd", arg=live.element_handle())  # it follows the end
    expect(card).to_have_attribute("data-status", "running")  # all of it before the command ended
    expect(live).to_have_css("font-family", re.compile("mono", re.IGNORECASE))
    no_sideways_scroll(page)
    screenshot(page, f"chat-shell-live-{width}")

    live.hover()
    page.mouse.wheel(0, -5000)  # the owner scrolls up to read
    page.wait_for_function("(pre) => pre.scrollTop === 0", arg=live.element_handle())
    seen = max(lines_of(live.evaluate(LIVE_STATE)["text"]))
    shown_through(live, seen + 5)
    assert live.evaluate(LIVE_STATE)["top"] == 0  # new output did not pull it back down

    # A reload, then one whose stored cards were read long before its transcript (as when a
    # page reads them a moment before an update): the card fills the gap from the server.
    activities = f"**/api/conversations/{conversation_id}/activities/"
    earlier = live_owner.api("GET", f"/api/conversations/{conversation_id}/activities/").text
    for stale in (False, True):
        if stale:
            page.route(activities, lambda route: route.fulfill(body=earlier, content_type="application/json"), times=1)
        page.reload()
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        card = tool_card(page, "toolu_live")
        expect(card).to_have_attribute("data-status", "running")
        card.locator("summary").click()
        live = card.locator(".tool-live")
        seen += 5
        shown_through(live, seen)  # what was stored before the reload, and what came after it
        page.wait_for_function("(pre) => !pre.textContent.includes('…')", arg=live.element_handle(), timeout=TURN_MS)
        numbers = lines_of(live.evaluate(LIVE_STATE)["text"])
        assert numbers == list(range(1, len(numbers) + 1))  # from the first line on, nothing missing or twice
        expect(card).to_have_attribute("data-status", "running")

    page.keyboard.press("Escape")  # stop it: the card keeps what it printed
    expect(card).to_have_attribute("data-status", "cancelled")
    expect(card.locator(".tool-live")).to_have_count(0)
    expect(card.locator(".tool-stdout")).to_contain_text("line 1\n")
    expect(card.locator(".tool-facts")).to_contain_text("stopped by you")


@pytest.fixture
def worker_without_docker(live_stack: LiveStack) -> Iterator[None]:
    """The live worker restarted with no Docker engine where DOCKER_HOST points; restored after."""
    normal = dict(live_stack.stack.env)
    live_stack.stack.env = {**normal, "DOCKER_HOST": ABSENT}
    live_stack.restart("worker")
    try:
        yield
    finally:
        live_stack.stack.env = normal
        live_stack.restart("worker")


def test_it_answers_unavailable_with_the_fix_and_the_turn_goes_on_without_docker(
    worker_without_docker: None,
    chat_page: Page,
    live_owner: OwnerClient,
    anthropic_key: str,
    fake_providers: FakeProviders,
) -> None:
    page = chat_page
    fake_providers.script(
        [Call("toolu_shell", "shell", {"command": "echo hi"})], [Text("The shell is not available here.")]
    )
    conversation_id = live_owner.create_conversation("No Docker")
    open_conversation(page, conversation_id)

    send(page, "Run echo hi")

    card = tool_card(page, "toolu_shell", timeout_ms=TURN_MS)
    expect(card).to_have_attribute("data-status", "unavailable", timeout=TURN_MS)
    expect(last_answer(page)).to_contain_text("The shell is not available here.")
    expect(page.locator("#stop")).to_be_hidden()
    expect(card.locator(".tool-reason")).to_contain_text(f"no Docker engine answers at {ABSENT}")  # still folded
    card.locator("summary").click()
    expect(card.locator(".tool-summary")).to_contain_text(f"no Docker engine answers at {ABSENT}")
    expect(card.locator(".tool-summary")).to_contain_text("dockerd --bridge=none")
    expect(card.locator(".tool-command")).to_have_text("echo hi")

    page.goto("/settings/")
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    page.get_by_role("link", name="System").click()
    page.wait_for_function(
        "() => document.querySelector('#system-list [data-component=docker]')?.dataset.state === 'missing'"
        " || (document.querySelector('#system-reload').click(), false)",
        polling=1000,
        timeout=TURN_MS,
    )
    docker_row = row(page, "docker")
    expect(docker_row.locator(".system-detail")).to_have_text(f"No Docker engine answers at {ABSENT}.")
    expect(docker_row.locator(".system-fix")).to_contain_text("dockerd --bridge=none --iptables=false")
    expect(row(page, "sandbox_image")).to_have_attribute("data-state", "missing")
    screenshot(page, "system-no-docker")
