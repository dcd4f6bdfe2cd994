"""Browser tasks run in this process: real Chromium, the fixture sites, a scripted task model."""

from __future__ import annotations

import pytest

from conversations.models import Message, MessageRole
from tests.support.browser_tasks import (
    answer,
    kinds,
    new_conversation,
    open_point,
    orm,
    page_sent,
    propose,
    results_sent,
    run,
    start,
    step,
    task_requests,
)
from tools.web.browser import chromium_path

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(chromium_path(refresh=True) is None, reason="no Chromium on this machine"),
]


async def test_it_pauses_before_place_order_and_the_exact_reply_places_it_once(anthropic, fake_providers, cancels, web):
    conversation_id = await new_conversation()
    task_id = await start(
        conversation_id,
        await propose(
            conversation_id, goal="Buy one blue kettle.", start_url=web.url("/shop"), restrictions=["At most 30 EUR."]
        ),
    )
    fake_providers.script(step("click", element=1), step("click", element=2), step("click", element=1))

    task = await run(task_id, cancels)

    assert task.status == "paused"
    point = await open_point(task_id)
    assert point.kind == "confirm"
    assert point.action["description"] == f"Clicking 'Place order' on 127.0.0.1:{web.port}"
    assert web.cart == ["Blue kettle"]
    assert web.orders == []
    assert "/shop/order" not in web.paths()
    requests = task_requests(fake_providers)
    assert '[1] button "Add to cart"' in page_sent(requests[0])
    assert '[1] button "Place order"' in page_sent(requests[2])

    fake_providers.script(
        step("click", element=1, critical_point_id=str(point.id)),
        step("finish", outcome="completed", summary="The page confirmed order A-1001."),
    )
    await answer(conversation_id, point.id, response="Yes, place it.")
    task = await run(task_id, cancels)

    assert task.status == "completed"
    assert web.orders == [["Blue kettle"]]
    last_results = results_sent(task_requests(fake_providers)[3])
    assert last_results[-1]["owner_reply"] == "Yes, place it."
    assert last_results[-1]["critical_point_id"] == str(point.id)
    assert last_results[-1]["performed"] is False
    happened = await kinds(conversation_id)
    assert happened.count("critical_point.opened") == 1
    assert happened.count("critical_point.resolved") == 1
    assert happened.count("browser_task.finished") == 1
    [message] = await orm(
        lambda: list(Message.objects.filter(conversation_id=conversation_id, role=MessageRole.ASSISTANT))
    )()
    assert message.parts == [{"type": "text", "text": "**Browser task completed.** The page confirmed order A-1001."}]
