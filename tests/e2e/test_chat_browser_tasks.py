"""Browser tasks on the chat page in real Chromium against the live stack.

The chat model proposes, the owner starts from the readback card, answers the task's
questions on its card, and signs in through the live view of the task's own page (a
Chromium in the worker, reaching the fixture sites of this test process).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, FloatRect, Locator, Page, WebSocketRoute, expect

from conversations.models import BrowserTask, CriticalPoint, Event, Message
from tests.e2e.chat_support import no_sideways_scroll, open_conversation, send
from tests.e2e.conftest import screenshot
from tests.support.browser_tasks import page_sent, step, task_requests
from tests.support.fake_providers import Call, FakeProviders, Text
from tests.support.live import LiveStack
from tests.support.live_clients import OwnerClient
from tests.support.trap_shop import FORM_PASSWORD
from tests.support.web_fixtures import FIXTURE_PASSWORD, FixtureWeb, fixture_web_start
from tools.browser_tasks.inputs import VIEWPORT

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

TASK_MS = 60_000
SNEAKY = "<img src=x onerror=alert(1)>"


@pytest.fixture
def web() -> Iterator[FixtureWeb]:
    server = fixture_web_start()
    server.reset()
    yield server
    server.reset()


def propose(
    page: Page, fake_providers: FakeProviders, *, goal: str, start_url: str, restrictions: list[str]
) -> Locator:
    """The owner asks; the chat model proposes; return the readback card."""
    proposal = {"goal": goal, "start_url": start_url, "restrictions": restrictions}
    fake_providers.script([Call("toolu_propose", "browser_task_propose", proposal)], [Text("Check and press Start.")])
    send(page, "Please do this in the browser for me.")
    card = page.locator(".task-card").last
    expect(card).to_be_visible()
    return card


def open_point_id(timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        point = CriticalPoint.objects.filter(state="open").first()
        if point is not None:
            return str(point.id)
        time.sleep(0.1)
    raise AssertionError("no critical point opened")


def test_the_readback_card_starts_the_task_and_the_question_card_answers_it(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, web: FixtureWeb
) -> None:
    page = chat_page
    conversation_id = live_owner.create_conversation("Kettle")
    open_conversation(page, conversation_id)

    card = propose(
        page,
        fake_providers,
        goal=f"Buy one blue kettle. {SNEAKY}",
        start_url=web.url("/shop"),
        restrictions=["At most 30 EUR.", f"No gift wrap {SNEAKY}"],
    )

    expect(card.locator(".task-goal")).to_have_text(f"Buy one blue kettle. {SNEAKY}")
    expect(card.locator(".task-url")).to_have_text(web.url("/shop"))
    expect(card.locator(".task-restrictions li")).to_have_text(["At most 30 EUR.", f"No gift wrap {SNEAKY}"])
    expect(card.locator("img")).to_have_count(0)
    expect(card.get_by_role("button", name="Dismiss")).to_be_visible()
    assert not BrowserTask.objects.exists()
    screenshot(page, "browser-task-readback")

    fake_providers.script(step("click", element=1))
    card.get_by_role("button", name="Start").click()

    # "Add to cart" sends a POST: held, with what it would send, until the owner approves.
    expect(card.locator(".task-question-text")).to_contain_text("Nothing was sent", timeout=TASK_MS)
    held = card.locator(".task-held-requests li")
    expect(held).to_have_count(1)
    expect(held.locator(".task-submission-address")).to_have_text(f"POST {web.url('/shop/cart/add')}")
    expect(held.locator(".task-submission-button")).to_have_text("Button: “Add to cart”")
    screenshot(page, "browser-task-held-request")
    added = open_point_id()
    fake_providers.script(
        step("click", element=1, critical_point_id=added), step("click", element=2), step("click", element=1)
    )
    card.get_by_role("button", name="Approve").click()

    expect(card.locator(".task-question-text")).to_contain_text("Clicking 'Place order'", timeout=TASK_MS)
    expect(card.locator(".task-held")).to_have_text(f"Held: Clicking 'Place order' on 127.0.0.1:{web.port}")
    expect(card.locator(".task-state")).to_have_text("Waiting for your answer")
    expect(card.get_by_role("button", name="Start")).to_have_count(0)
    expect(page.locator("#stop")).to_be_visible()
    assert web.cart == ["Blue kettle"]
    assert web.orders == []
    screenshot(page, "browser-task-question")

    # Words alone authorise nothing: the model hears them, and the order is asked again.
    point_id = open_point_id()
    fake_providers.script(step("click", element=1, critical_point_id=point_id))
    card.get_by_label("Your answer").fill("Yes, place the order.")
    card.get_by_role("button", name="Answer").click()
    page.wait_for_function(
        "id => document.querySelector('.task-question')?.dataset.pointId !== id", arg=point_id, timeout=TASK_MS
    )
    assert web.orders == []
    assert CriticalPoint.objects.get(id=point_id).response == "Yes, place the order."
    assert CriticalPoint.objects.get(id=point_id).approved is None

    again = open_point_id()
    fake_providers.script(
        step("click", element=1, critical_point_id=again),
        step("finish", outcome="completed", summary="The page confirmed order A-1001."),
    )
    card.get_by_role("button", name="Approve").click()

    expect(card.locator(".task-outcome")).to_have_text("Completed: The page confirmed order A-1001.", timeout=TASK_MS)
    expect(page.locator(".msg.assistant .md").last).to_have_text(
        "Browser task completed. The page confirmed order A-1001."
    )
    expect(page.locator("#stop")).to_be_hidden()
    assert web.orders == [["Blue kettle"]]
    assert CriticalPoint.objects.get(id=again).approved is True

    page.reload()
    card = page.locator(".task-card")
    expect(card.locator(".task-outcome")).to_have_text("Completed: The page confirmed order A-1001.")
    expect(card.locator(".task-goal")).to_have_text(f"Buy one blue kettle. {SNEAKY}")
    expect(card.get_by_role("button", name="Start")).to_have_count(0)


def test_a_newer_proposal_replaces_the_older_card_and_dismiss_is_final(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, web: FixtureWeb
) -> None:
    page = chat_page
    conversation_id = live_owner.create_conversation("Two proposals")
    open_conversation(page, conversation_id)
    first = propose(page, fake_providers, goal="The first idea.", start_url=web.url("/shop"), restrictions=[])
    expect(first.get_by_role("button", name="Start")).to_be_visible()

    second = propose(page, fake_providers, goal="The better idea.", start_url=web.url("/shop"), restrictions=[])

    expect(page.locator(".task-card")).to_have_count(2)
    first = page.locator(".task-card").first
    expect(first.locator(".task-state")).to_have_text("Replaced by a newer proposal")
    expect(first.get_by_role("button", name="Start")).to_have_count(0)
    second.get_by_role("button", name="Dismiss").click()
    expect(second.locator(".task-state")).to_have_text("Dismissed")
    expect(second.get_by_role("button", name="Start")).to_have_count(0)

    page.reload()
    expect(page.locator(".task-card .task-state")).to_have_text(["Replaced by a newer proposal", "Dismissed"])
    assert not BrowserTask.objects.exists()


def field_centres(browser: Browser, web: FixtureWeb) -> dict[str, tuple[float, float]]:
    """Where the sign-in page's fields are in the task's viewport (the same page, the same size)."""
    context = browser.new_context(viewport={"width": VIEWPORT["width"], "height": VIEWPORT["height"]})
    try:
        probe = context.new_page()
        probe.goto(web.url("/signin"))
        centres = {}
        for name in ("username", "password"):
            box = probe.locator(f"#{name}").bounding_box()
            assert box is not None
            centres[name] = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        return centres
    finally:
        context.close()


def click_in_picture(page: Page, picture: Locator, at: tuple[float, float]) -> None:
    box = picture.bounding_box()
    assert box is not None
    page.mouse.click(
        box["x"] + at[0] * box["width"] / VIEWPORT["width"], box["y"] + at[1] * box["height"] / VIEWPORT["height"]
    )


def test_the_owner_signs_in_through_the_live_view_and_nothing_typed_is_kept(
    chat_page: Page,
    browser: Browser,
    live_stack: LiveStack,
    live_owner: OwnerClient,
    anthropic_key: str,
    fake_providers: FakeProviders,
    web: FixtureWeb,
) -> None:
    page = chat_page
    centres = field_centres(browser, web)
    conversation_id = live_owner.create_conversation("Sign in")
    open_conversation(page, conversation_id)
    card = propose(page, fake_providers, goal="Open my account page.", start_url=web.url("/signin"), restrictions=[])
    fake_providers.script(step("request_sign_in", reason="The account page needs your sign-in."))
    card.get_by_role("button", name="Start").click()

    picture = card.locator(".task-live-image")
    expect(picture).to_be_visible(timeout=TASK_MS)
    expect(picture).to_have_attribute("src", re.compile(r"^data:image/jpeg;base64,"))
    expect(card.locator(".task-question-text")).to_have_text("The account page needs your sign-in.")
    screenshot(page, "browser-task-sign-in")
    click_in_picture(page, picture, centres["username"])
    page.keyboard.type("alice", delay=20)
    click_in_picture(page, picture, centres["password"])
    page.keyboard.type(FIXTURE_PASSWORD, delay=20)
    page.keyboard.press("Enter")
    deadline = time.monotonic() + 30
    while web.sign_ins != ["alice"] and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    assert web.sign_ins == ["alice"]

    fake_providers.script(step("finish", outcome="completed", summary="The page says: Signed in as alice."))
    card.get_by_role("button", name="Continue after sign-in").click()

    expect(card.locator(".task-outcome")).to_have_text("Completed: The page says: Signed in as alice.", timeout=TASK_MS)
    expect(card.locator(".task-live")).to_have_count(0)
    seen = page_sent(task_requests(fake_providers)[-1])
    assert "Signed in as alice." in seen
    stored = " ".join(
        [
            str(list(Event.objects.values_list("data", flat=True))),
            str(list(Message.objects.values_list("parts", flat=True))),
            str(list(BrowserTask.objects.values_list("steps", flat=True))),
            str(list(CriticalPoint.objects.values_list("response", flat=True))),
        ]
    )
    for place, text in [("the stored rows", stored), ("the logs", live_stack.logs())]:
        assert FIXTURE_PASSWORD not in text, place
    assert all(FIXTURE_PASSWORD not in str(r.body) for r in fake_providers.requests)


def test_escape_in_the_answer_box_only_leaves_it_and_stopping_the_task_asks_first(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, web: FixtureWeb
) -> None:
    page = chat_page
    conversation_id = live_owner.create_conversation("Stopped")
    open_conversation(page, conversation_id)
    card = propose(page, fake_providers, goal="Buy one blue kettle.", start_url=web.url("/shop"), restrictions=[])
    fake_providers.script(step("ask_owner", question="Which size?"))
    card.get_by_role("button", name="Start").click()
    expect(card.locator(".task-question-text")).to_have_text("Which size?", timeout=TASK_MS)
    [task] = BrowserTask.objects.all()
    box = card.get_by_label("Your answer")
    box.fill("The large one")
    asked = page.get_by_role("alertdialog", name="Stop the task? Its steps are kept.")

    # Escape in the answer box only leaves it: what was typed stays, and nothing is asked or stopped.
    box.press("Escape")
    expect(box).not_to_be_focused()
    expect(box).to_have_value("The large one")
    expect(asked).to_have_count(0)

    # Escape outside a field asks first, in the page; its own Escape takes the question back.
    page.keyboard.press("Escape")
    expect(asked).to_be_visible()
    expect(asked.get_by_role("button", name="Keep it")).to_be_focused()
    screenshot(page, "browser-task-stop-asked")
    page.keyboard.press("Escape")
    expect(asked).to_have_count(0)
    expect(card.locator(".task-state")).to_have_text("Waiting for your answer")
    expect(box).to_have_value("The large one")
    task.refresh_from_db()
    assert task.status == "paused"

    # Stop asks the same; stopping keeps the card's steps.
    page.locator("#stop").click()
    asked.get_by_role("button", name="Stop the task").click()

    expect(card.locator(".task-outcome")).to_have_text("Cancelled: The owner cancelled the browser task.")
    expect(card.locator(".task-state")).to_have_text("Cancelled")
    expect(card.locator("details.task-record summary")).to_have_text("Steps and answers (1 step, 1 question)")
    expect(page.locator("#stop")).to_be_hidden()
    task.refresh_from_db()
    assert task.status == "cancelled"


WIDTHS = [pytest.param(width, id=f"{width}px") for width in (1280, 375)]


def boxes_within(card: Locator, *parts: Locator) -> list[FloatRect]:
    """Each part's box, asserting it lies inside the card (nothing cut off or pushed out sideways)."""
    outer = card.bounding_box()
    assert outer is not None
    found = []
    for part in parts:
        box = part.bounding_box()
        assert box is not None
        assert outer["x"] - 1 <= box["x"], box
        assert box["x"] + box["width"] <= outer["x"] + outer["width"] + 1, box
        found.append(box)
    return found


def test_a_forms_approval_question_lists_its_fields_with_the_password_masked_its_button_and_its_address(
    chat_page: Page,
    live_stack: LiveStack,
    live_owner: OwnerClient,
    anthropic_key: str,
    fake_providers: FakeProviders,
    web: FixtureWeb,
) -> None:
    page = chat_page
    conversation_id = live_owner.create_conversation("Pay")
    open_conversation(page, conversation_id)
    card = propose(
        page, fake_providers, goal="Pay for the kettle.", start_url=web.url("/traps/pay-form"), restrictions=[]
    )
    fake_providers.script(step("click", element=3))  # "Pay now", the form's submit button
    card.get_by_role("button", name="Start").click()

    submission = card.locator(".task-question .task-submission")
    address = submission.locator(".task-submission-address")
    expect(address).to_have_text(f"POST {web.url('/traps/do/pay-form?step=final')}", timeout=TASK_MS)
    expect(submission.locator(".task-submission-button")).to_have_text("Button: “Pay now”")
    names, values = submission.locator(".task-field-name"), submission.locator(".task-field-value")
    expect(names).to_have_text(["holder", "p", "basket hidden"])
    expect(values).to_have_text(["Alice Example", "••••", "kettle-42"])
    expect(submission.locator(".task-field-masked")).to_have_text(["••••"])
    expect(page.locator("body")).not_to_contain_text(FORM_PASSWORD)

    for width in (1280, 375):
        page.set_viewport_size({"width": width, "height": 800})
        boxes_within(card, submission, address)
        for row in range(3):  # each name beside its value, both inside the card
            name_box, value_box = boxes_within(card, names.nth(row), values.nth(row))
            assert name_box["x"] + name_box["width"] <= value_box["x"], (width, row)
            assert abs(name_box["y"] - value_box["y"]) < name_box["height"], (width, row)
        no_sideways_scroll(page)
        submission.evaluate("box => box.scrollIntoView({block: 'center'})")
        screenshot(page, f"browser-task-submission-{width}")

    assert web.harms == []
    stored = str(list(Event.objects.values_list("data", flat=True))) + str(list(CriticalPoint.objects.values()))
    for place, text in [("the stored rows", stored), ("the logs", live_stack.logs())]:
        assert FORM_PASSWORD not in text, place
    assert all(FORM_PASSWORD not in str(r.body) for r in fake_providers.requests)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_finished_cards_record_keeps_steps_and_answers_collapsed_and_a_reload_shows_it_again(
    chat_page: Page,
    live_owner: OwnerClient,
    anthropic_key: str,
    fake_providers: FakeProviders,
    web: FixtureWeb,
    width: int,
) -> None:
    page = chat_page
    page.set_viewport_size({"width": width, "height": 800})
    conversation_id = live_owner.create_conversation("Record")
    open_conversation(page, conversation_id)
    card = propose(page, fake_providers, goal="Buy one blue kettle.", start_url=web.url("/shop"), restrictions=[])
    fake_providers.script(step("click", element=1))
    card.get_by_role("button", name="Start").click()

    # A held action: Approve and Deny beside the free-text answer, all inside the card.
    approve, deny = card.get_by_role("button", name="Approve"), card.get_by_role("button", name="Deny")
    expect(approve).to_be_visible(timeout=TASK_MS)
    words = card.get_by_label("Your answer")
    expect(words).to_have_attribute("placeholder", "Or say what to do instead (this does not approve)")
    approve_box, deny_box, words_box = boxes_within(card, approve, deny, words)
    assert approve_box["x"] + approve_box["width"] <= deny_box["x"]  # side by side
    if width >= 1280:  # wide: the answer box is on the buttons' row, beside them
        assert deny_box["x"] + deny_box["width"] <= words_box["x"]
        assert words_box["y"] < deny_box["y"] + deny_box["height"]
    no_sideways_scroll(page)
    screenshot(page, f"browser-task-approve-deny-{width}")
    added = open_point_id()
    fake_providers.script(
        step("click", element=1, critical_point_id=added), step("click", element=2), step("click", element=1)
    )
    approve.click()

    expect(card.locator(".task-held")).to_have_text(
        f"Held: Clicking 'Place order' on 127.0.0.1:{web.port}", timeout=TASK_MS
    )
    order = open_point_id()
    fake_providers.script(step("ask_owner", question="Keep the kettle in the cart?"))
    card.get_by_role("button", name="Deny").click()

    expect(card.locator(".task-question-text")).to_have_text("Keep the kettle in the cart?", timeout=TASK_MS)
    assert web.orders == []
    denied = CriticalPoint.objects.get(id=order)
    assert (denied.approved, denied.response) == (False, "Denied: do not do this.")
    # While the task runs, its record is open and grows.
    record = card.locator("details.task-record")
    expect(record).to_have_attribute("open", "")
    expect(record.locator(".task-step")).to_have_count(5)
    fake_providers.script(step("finish", outcome="failed", summary="Not ordered: you denied the order."))
    card.get_by_label("Your answer").fill("Yes, keep it.")
    card.get_by_role("button", name="Answer").click()
    expect(card.locator(".task-outcome")).to_have_text("Failed: Not ordered: you denied the order.", timeout=TASK_MS)

    host = f"127.0.0.1:{web.port}"
    steps = [
        f"Clicking 'Add to cart' on {host}",
        f"Clicking 'Add to cart' on {host}",
        f"Clicking 'View cart' on {host}",
        f"Clicking 'Place order' on {host}",
        "Asking you a question",
    ]
    answers = [
        "You approved: “Approved.”",
        "You denied: “Denied: do not do this.”",
        "You answered: “Yes, keep it.”",
    ]

    def record_shows_everything(record: Locator) -> None:
        summary = record.locator("summary")
        expect(summary).to_have_text("Steps and answers (5 steps, 3 questions)")
        expect(record).not_to_have_attribute("open", "")  # collapsed once the task ended
        expect(record.locator(".task-steps")).to_be_hidden()
        summary.click()
        expect(record.locator(".task-step-text")).to_have_text(steps)
        expect(record.locator(".task-step-outcome")).to_have_text(["Answered", "Done", "Done", "Answered", "Answered"])
        expect(record.locator(".task-step-element").first).to_have_text('element 1: button "Add to cart"')
        expect(record.locator(".task-step-page")).to_have_text([web.url("/shop")] * 3 + [web.url("/shop/cart")] * 2)
        expect(record.locator(".task-record-answer-text")).to_have_text(answers)
        expect(record.locator(".task-record-answer time")).to_have_count(3)
        expect(record.locator(".task-record-held").nth(1)).to_have_text(f"Held: Clicking 'Place order' on {host}")
        boxes_within(card, record.locator(".task-steps"))

    record_shows_everything(card.locator("details.task-record"))
    no_sideways_scroll(page)
    screenshot(page, f"browser-task-record-{width}")

    page.reload()
    card = page.locator(".task-card")
    expect(card.locator(".task-outcome")).to_have_text("Failed: Not ordered: you denied the order.")
    record_shows_everything(card.locator("details.task-record"))


@pytest.mark.parametrize("width", WIDTHS)
def test_a_correction_carries_the_restrictions_over_and_its_start_supersedes_the_paused_task(
    chat_page: Page,
    live_owner: OwnerClient,
    anthropic_key: str,
    fake_providers: FakeProviders,
    web: FixtureWeb,
    width: int,
) -> None:
    page = chat_page
    page.set_viewport_size({"width": width, "height": 800})
    conversation_id = live_owner.create_conversation("Correction")
    open_conversation(page, conversation_id)
    propose(
        page, fake_providers, goal="Buy one blue kettle.", start_url=web.url("/shop"), restrictions=["At most 30 EUR."]
    )
    first = page.locator(".task-card").first
    fake_providers.script(step("click", element=2), step("ask_owner", question="Which size?"))
    first.get_by_role("button", name="Start").click()
    expect(first.locator(".task-question-text")).to_have_text("Which size?", timeout=TASK_MS)

    # The owner corrects the task in the chat; the model forgets the budget, which is carried over.
    propose(
        page, fake_providers, goal="Buy one red kettle.", start_url=web.url("/shop"), restrictions=["Red, not blue."]
    )
    expect(page.locator(".task-card")).to_have_count(2)
    correction = page.locator(".task-card").nth(1)
    expect(correction.locator(".task-corrects")).to_contain_text("The unfinished browser task above")
    expect(correction.locator(".task-restrictions li")).to_have_text(["At most 30 EUR. carried over", "Red, not blue."])
    expect(correction.locator(".task-restrictions li.task-carried")).to_have_text(["At most 30 EUR. carried over"])
    expect(first.locator(".task-state")).to_have_text("Waiting for your answer")  # nothing changed yet
    no_sideways_scroll(page)
    screenshot(page, f"browser-task-correction-{width}")

    fake_providers.script(step("finish", outcome="completed", summary="The cart page shows one kettle."))
    correction.get_by_role("button", name="Start").click()

    expect(first.locator(".task-state")).to_have_text("Superseded by your correction", timeout=TASK_MS)
    expect(first.locator(".task-outcome")).to_have_text(
        "Superseded: The owner corrected the task; the corrected task continues in its place."
    )
    expect(first.locator(".task-question")).to_be_hidden()
    expect(correction.locator(".task-outcome")).to_have_text(
        "Completed: The cart page shows one kettle.", timeout=TASK_MS
    )
    expect(correction.locator(".task-corrects")).to_have_text("The browser task above.")  # no Start to end it
    expect(page.locator(".msg.assistant .md", has_text="Browser task superseded.")).to_have_count(1)
    tasks = list(BrowserTask.objects.order_by("created_at"))
    assert [t.status for t in tasks] == ["superseded", "completed"]
    assert tasks[1].restrictions == ["At most 30 EUR.", "Red, not blue."]
    continued = page_sent(task_requests(fake_providers)[-1])
    assert "Your cart" in continued  # it went on from the paused task's page, not from the shop

    def superseded_card_keeps_its_steps(card: Locator) -> None:
        record = card.locator("details.task-record")
        expect(record).not_to_have_attribute("open", "")
        record.locator("summary").click()
        expect(record.locator(".task-step-text")).to_have_text(
            [f"Clicking 'View cart' on 127.0.0.1:{web.port}", "Asking you a question"]
        )
        expect(record.locator(".task-record-answer-text")).to_have_text(["Not answered: the task ended first"])

    superseded_card_keeps_its_steps(first)
    screenshot(page, f"browser-task-superseded-{width}")
    page.reload()
    cards = page.locator(".task-card")
    expect(cards).to_have_count(2)
    expect(cards.first.locator(".task-state")).to_have_text("Superseded by your correction")
    superseded_card_keeps_its_steps(cards.first)
    expect(cards.last.locator(".task-restrictions li.task-carried")).to_have_text(["At most 30 EUR. carried over"])
    expect(cards.last.locator(".task-state")).to_have_text("Completed")
    expect(cards.last.locator(".task-corrects")).to_have_text("The browser task above.")


def test_an_answer_given_while_the_socket_is_away_goes_once_it_is_back(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, web: FixtureWeb
) -> None:
    """A page just opened from the needs-you list, or one whose socket dropped, shows the
    question before its socket is live: Approve then waits for the socket, not fails."""
    page = chat_page
    away = threading.Event()
    sockets: list[WebSocketRoute] = []

    def through_unless_away(ws: WebSocketRoute) -> None:
        if away.is_set():
            ws.close(code=1012, reason="restarting")  # refused before it reached the server
            return
        server = ws.connect_to_server()
        sockets.append(ws)
        ws.on_close(lambda code, reason: server.close())

    page.route_web_socket(re.compile(r"/ws/conversations/"), through_unless_away)
    conversation_id = live_owner.create_conversation("Kettle")
    open_conversation(page, conversation_id)
    card = propose(page, fake_providers, goal="Buy one blue kettle.", start_url=web.url("/shop"), restrictions=[])
    fake_providers.script(step("click", element=1))
    card.get_by_role("button", name="Start").click()
    expect(card.locator(".task-question-text")).to_contain_text("Nothing was sent", timeout=TASK_MS)
    point = open_point_id()
    fake_providers.script(
        step("click", element=1, critical_point_id=point),
        step("finish", outcome="completed", summary="The kettle is in the cart."),
    )

    away.set()
    sockets[-1].close(code=1012, reason="restarting")  # the server restarts: the page reconnects
    expect(page.locator("#connection")).to_have_attribute("data-state", "reconnecting")
    card.get_by_role("button", name="Approve").click()
    expect(card).not_to_contain_text("Not connected")
    assert CriticalPoint.objects.get(id=point).state == "open"  # nothing went while away
    away.clear()

    expect(card.locator(".task-outcome")).to_have_text("Completed: The kettle is in the cart.", timeout=TASK_MS)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    assert CriticalPoint.objects.get(id=point).approved is True
    assert web.cart == ["Blue kettle"]
