"""An approval question says what would be submitted: the address, the button, the fields and values, masked.

Real Chromium on the trap shop's payment forms (`tests/support/trap_shop.py`, `FORMS`): a
text field, a password field and a hidden field, submitted by a submit button (held by its
name, the form read before the click), by a script's `requestSubmit()` (held by the network,
the page's controls telling which field is the password) and as a script's JSON.
"""

from __future__ import annotations

import json

import pytest

from conversations.models import CriticalPoint, Event
from tests.support.browser_tasks import new_conversation, open_point, orm, propose, run, start, step
from tests.support.trap_shop import FORM_PASSWORD
from tools.browser_tasks.submission import MASK

pytestmark = [pytest.mark.django_db(transaction=True)]


FIELDS = [
    {"name": "holder", "value": "Alice Example", "hidden": False, "masked": False, "cut": False},
    {"name": "p", "value": MASK, "hidden": False, "masked": True, "cut": False},
    {"name": "basket", "value": "kettle-42", "hidden": True, "masked": False, "cut": False},
]


def submission(port: int, page: str, **shown: object) -> dict[str, object]:
    return {
        "form": True,
        "method": "POST",
        "address": f"http://127.0.0.1:{port}/traps/do/{page}",
        "button": "Next",
        "button_text": None,
        "fields": FIELDS,
        "fields_more": 0,
        "body": None,
        "body_cut": False,
        **shown,
    }


async def stored_text() -> str:
    rows = await orm(
        lambda: [list(Event.objects.values_list("data", flat=True)), list(CriticalPoint.objects.values())]
    )()
    return json.dumps(rows, default=str)


async def test_a_submit_buttons_question_shows_its_forms_fields_with_the_password_masked(
    anthropic, fake_providers, cancels, web
):
    conversation_id = await new_conversation()
    task_id = await start(
        conversation_id, await propose(conversation_id, goal="Pay.", start_url=web.url("/traps/pay-form"))
    )
    fake_providers.script(step("click", element=3))

    task = await run(task_id, cancels)

    assert task.status == "paused", (task.outcome_summary, task.steps)
    point = await open_point(task_id)
    assert point.question.endswith("submits a form. Approve to let Flarebot do exactly this, once; Deny to stop it.")
    assert point.action["submission"] == submission(web.port, "pay-form?step=final", button="Pay now")
    assert web.harms == []
    assert FORM_PASSWORD not in await stored_text()


@pytest.mark.parametrize("page", ["scripted-form", "json-form"])
async def test_a_held_requests_question_shows_its_fields_or_body_with_the_password_masked_under_any_name(
    anthropic, fake_providers, cancels, web, page
):
    conversation_id = await new_conversation()
    task_id = await start(
        conversation_id, await propose(conversation_id, goal="Pay.", start_url=web.url(f"/traps/{page}"))
    )
    fake_providers.script(step("click", element=3))

    task = await run(task_id, cancels)

    assert task.status == "paused", (task.outcome_summary, task.steps)
    point = await open_point(task_id)
    [held] = point.action["requests"]
    if page == "scripted-form":
        # The field is named "p": the page's password control masks it, the hidden input marks "basket".
        expected = submission(web.port, page)
    else:
        json_body = json.dumps({"holder": "Alice Example", "p": MASK, "card": {"cvc": MASK}}, ensure_ascii=False)
        expected = submission(web.port, page, form=False, fields=[], body=json_body)
    assert held["submission"] == expected
    assert "tried to send: POST" in point.question
    assert web.harms == []
    assert FORM_PASSWORD not in await stored_text()
