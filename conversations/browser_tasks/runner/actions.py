"""One action of a task: checked against its schema and the critical points, then performed or held.

An action is recorded before it is done, so a crash in between never repeats it. One that
is critical by its name, or whose requests the guard held, pauses the task at a critical
point for the owner; the owner's approval is bound to exactly that action, in that context.
The question says what would be submitted (`tools.browser_tasks.submission`): a held click
on a submit button reads its form first; a network hold summarises the requests it held.
"""

from __future__ import annotations

import asyncio
import uuid
from contextlib import suppress
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from conversations.browser_tasks import live_view
from conversations.browser_tasks.lifecycle import Pause, browser_task_pause
from conversations.browser_tasks.model import SCHEMAS, action_digest
from conversations.browser_tasks.runner.attempt import Attempt, Stopped
from conversations.models import BrowserTaskStatus, CriticalPointKind
from conversations.providers.base import ToolCall
from flarebot.core.database import db
from tools.browser_tasks.critical import critical_point_of, go_to_critical
from tools.browser_tasks.guard import SentRequest
from tools.browser_tasks.kept import kept_sessions
from tools.browser_tasks.page import Element, Observation
from tools.browser_tasks.session import ACTION_TIMEOUT, ActionFailed
from tools.browser_tasks.submission import (
    NO_CONTROLS,
    Controls,
    Submission,
    controls_from,
    form_submission,
    request_submission,
)
from tools.web.sources import host_of

_VALIDATORS = {name: Draft202012Validator(schema) for name, schema in SCHEMAS.items()}


_ASKING = {
    "ask_owner": "Asking you a question",
    "request_sign_in": "Asking you to sign in",
    "request_email_consent": "Asking your consent to send",
}
_ON_ELEMENT = ("click", "type", "select", "request_email_consent")
PAGE_MAX = 2_048  # of a page's address in the record
SUBMISSIONS_MAX = 5  # held requests of one question shown with their fields and values (the rest by name)


def _pressed(element: Element | None) -> tuple[str | None, str | None]:
    """A clicked button's accessible name and visible text (both None for what is not a button)."""
    if element is None or not (element.submit or element.role == "button"):
        return None, None
    return element.label or element.name, element.name


def _element_description(name: str, element: Element | None, host: str) -> str:
    label = f"'{element.name}'" if element is not None and element.name else "an element"
    verb = {"click": "Clicking", "type": "Typing into", "select": "Choosing an option of"}[name]
    return f"{verb} {label} on {host}" if host else f"{verb} {label}"


def describe(name: str, data: dict[str, Any], observation: Observation | None) -> str:
    """A step as the owner's card shows it: never typed text."""
    host = host_of(observation.url) if observation is not None else ""
    if name in ("click", "type", "select"):
        element = observation.element(int(data.get("element", 0))) if observation is not None else None
        return _element_description(name, element, host)
    if name == "go_to":
        return f"Opening {host_of(str(data.get('url', '')))}"
    if name == "scroll":
        return f"Scrolling {data.get('direction', 'down')} on {host}" if host else "Scrolling"
    if name == "wait":
        return f"Waiting {data.get('seconds', 1)} s"
    return _ASKING.get(name, "Waiting for your answer")


def shown(name: str, data: dict[str, Any], observation: Observation | None, url: str) -> dict[str, Any]:
    """What the task's record keeps of a step (`lifecycle.record`): its description, element and page.

    The element as the page named it, the page the step acted on (for go_to the address it
    opens); never the step's typed text.
    """
    number = data.get("element") if name in _ON_ELEMENT else None
    element = observation.element(number) if observation is not None and isinstance(number, int) else None
    page = str(data.get("url", "")) if name == "go_to" else (observation.url if observation is not None else url)
    return {
        "description": describe(name, data, observation),
        "element": {"number": element.number, "role": element.role, "name": element.name} if element else None,
        "page": page[:PAGE_MAX],
    }


class Acting(Attempt):
    """An attempt that acts: the step's action, its checks, and the pause at a critical point."""

    def _step(self, call: ToolCall) -> dict[str, Any]:
        return {"id": f"step-{len(self.steps) + 1}", "name": call.name, "input": call.input, "result": None}

    async def act(self, call: ToolCall, observation: Observation | None, authorization: dict[str, Any] | None) -> bool:
        step = self._step(call)
        validator = _VALIDATORS.get(call.name)
        if validator is None:
            return await self._refuse(step, f"There is no tool named {call.name[:60]!r}.")
        error = best_match(validator.iter_errors(call.input))
        if error is not None:
            return await self._refuse(step, f"Invalid input at {error.json_path}: {error.message}"[:500])
        data = call.input
        step["shown"] = shown(call.name, data, observation, self.url)
        if call.name == "finish":
            step["result"] = {"ok": True}
            self.steps.append(step)
            status = BrowserTaskStatus.COMPLETED if data["outcome"] == "completed" else BrowserTaskStatus.FAILED
            await self.end(status, data["summary"])
            return True
        if call.name == "ask_owner":
            return await self.pause(step, Pause(CriticalPointKind.QUESTION, data["question"]))
        if call.name == "request_sign_in":
            return await self.pause(step, Pause(CriticalPointKind.SIGN_IN, data["reason"]))
        if call.name == "request_email_consent":
            return await self.ask_consent(step, data, observation)
        element: Element | None = None
        reason: str | None = None
        if call.name in ("click", "type", "select"):
            element = observation.element(data["element"]) if observation is not None else None
            if element is None:
                return await self._refuse(step, f"There is no element {data['element']} on the current page.")
            reason = critical_point_of(call.name, element.as_dict())
        elif call.name == "go_to":
            reason = go_to_critical(data["url"])
        page_url = observation.url if observation is not None else self.url
        digest = action_digest(
            name=call.name, data=data, element=element.as_dict() if element is not None else {}, url=page_url
        )
        grant = self._granted(authorization, data.get("critical_point_id"), digest)
        if reason is not None and grant is None:
            submission = await self._form_submission(element) if call.name == "click" else None
            return await self.hold(step, observation, element, reason, digest, submission)
        return await self.perform(step, observation, grant=grant, digest=digest)

    async def ask_consent(self, step: dict[str, Any], data: dict[str, Any], observation: Observation | None) -> bool:
        """Ask for consent to send; bound to one click when the model names the control that sends."""
        number = data.get("element")
        if number is None:
            return await self.pause(step, Pause(CriticalPointKind.EMAIL_CONSENT, data["question"]))
        element = observation.element(number) if observation is not None else None
        if element is None or observation is None:
            return await self._refuse(step, f"There is no element {number} on the current page.")
        click = {"element": number}
        digest = action_digest(name="click", data=click, element=element.as_dict(), url=observation.url)
        action: dict[str, Any] = {
            "name": "click",
            "element": number,
            "description": describe("click", click, observation),
        }
        submission = await self._form_submission(element)
        if submission is not None:
            action["submission"] = submission
        return await self.pause(step, Pause(CriticalPointKind.EMAIL_CONSENT, data["question"], action, digest))

    async def _form_submission(self, element: Element | None) -> Submission | None:
        """What clicking this submit button would send (its form, read now), or None for another element."""
        if element is None or not element.submit or self.session is None:
            return None
        button, text = _pressed(element)
        return form_submission(await self.session.form_of(element.number), button=button, button_text=text)

    def _granted(self, authorization: dict[str, Any] | None, given: Any, digest: str) -> dict[str, Any] | None:
        """The owner's grant for exactly this action, in this context, now; None when there is none."""
        if authorization is None or self.session is None or not isinstance(given, str):
            return None
        if authorization.get("critical_point_id") != given.lower():
            return None
        if authorization.get("lease_id") != str(self.session.lease_id):
            return None  # given in another context: a restore asks again
        return authorization if authorization.get("digest") == digest else None

    async def _refuse(self, step: dict[str, Any], message: str) -> bool:
        step["result"] = {"ok": False, "error": "refused", "message": message}
        self.steps.append(step)
        self.actions += 1
        await self.record()
        return False

    async def perform(
        self,
        step: dict[str, Any],
        observation: Observation | None,
        *,
        grant: dict[str, Any] | None = None,
        digest: str = "",
    ) -> bool:
        assert self.session is not None
        description = describe(step["name"], step["input"], observation)
        self.steps.append(step)
        self.actions += 1
        # Recorded before it is done: a crash in between never repeats it (it becomes "interrupted").
        await self.record(card=description)
        if self.cancelled.is_set():
            raise Stopped
        guard = self.session.guard
        guard.act(
            page_url=observation.url if observation is not None else self.url,
            allowed=(grant or {}).get("requests", ()),
            allow_site=bool((grant or {}).get("by_name")),
        )
        try:
            action = asyncio.ensure_future(self._do(step["name"], step["input"]))
            cancel_wait = asyncio.ensure_future(self.cancelled.wait())
            try:
                await asyncio.wait(
                    {action, cancel_wait}, timeout=ACTION_TIMEOUT + 5, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                cancel_wait.cancel()
            if not action.done():
                action.cancel()
                with suppress(BaseException):
                    await action
        finally:
            effects = guard.rest()
        result = self._result_of(action)
        if effects.refused:
            result["refused"] = [sent.described() for sent in effects.refused]
            result["refused_note"] = "Requests that change state on other sites are never sent while a task acts."
        with suppress(Exception):
            self.url = self.session.page.url
        if self.cancelled.is_set():
            step["result"] = result
            await self.record()
            raise Stopped
        if effects.held:
            controls = controls_from(await self.session.controls()) if self.session is not None else NO_CONTROLS
            return await self.hold_sent(step, observation, effects.held, digest, controls)
        step["result"] = result
        await self.record()
        return False

    def _result_of(self, action: asyncio.Future[dict[str, Any]]) -> dict[str, Any]:
        from playwright.async_api import Error as PlaywrightError  # loads on first use

        if action.cancelled():
            if self.cancelled.is_set():
                return {"ok": False, "error": "cancelled", "message": "Stopped by the owner during this action."}
            return {
                "ok": False,
                "error": "action_failed",
                "message": f"The action did not finish within {ACTION_TIMEOUT:g} s.",
            }
        error = action.exception()
        if isinstance(error, ActionFailed):
            return {"ok": False, "error": "action_failed", "message": error.message}
        if error is not None:
            if not isinstance(error, PlaywrightError | TimeoutError):
                raise error
            return {"ok": False, "error": "action_failed", "message": "The browser could not do this action."}
        return action.result()

    async def _do(self, name: str, data: dict[str, Any]) -> dict[str, Any]:
        assert self.session is not None
        session = self.session
        if name == "go_to":
            await session.go_to(data["url"])
        elif name == "click":
            await session.click(data["element"])
        elif name == "type":
            await session.type(data["element"], data["text"])
        elif name == "select":
            chosen = await session.select(data["element"], data["option"])
            return {"ok": True, "chosen": chosen}
        elif name == "scroll":
            await session.scroll(data["direction"])
        elif name == "wait":
            await asyncio.sleep(int(data["seconds"]))
        return {"ok": True}

    async def hold(
        self,
        step: dict[str, Any],
        observation: Observation | None,
        element: Element | None,
        reason: str,
        digest: str,
        submission: Submission | None = None,
    ) -> bool:
        """Pause before an action that is critical by its name, holding exactly it for the owner's decision."""
        description = describe(step["name"], step["input"], observation)
        question = f"{description} {reason}. Approve to let Flarebot do exactly this, once; Deny to stop it."
        action: dict[str, Any] = {"name": step["name"], "description": description}
        if element is not None:
            action["element"] = element.number
        if submission is not None:
            action["submission"] = submission
        return await self.pause(step, Pause(CriticalPointKind.CONFIRM, question, action, digest))

    async def hold_sent(
        self,
        step: dict[str, Any],
        observation: Observation | None,
        held: list[SentRequest],
        digest: str,
        controls: Controls = NO_CONTROLS,
    ) -> bool:
        """Pause after an action whose state-changing requests were held, asking about exactly them."""
        description = describe(step["name"], step["input"], observation)
        sent = "; ".join(request.described() for request in held)
        question = (
            f"{description} tried to send: {sent}. Nothing was sent. Approve to let exactly this through when "
            "Flarebot repeats the action, once; Deny to stop it."
        )
        clicked = None
        if step["name"] == "click" and observation is not None:
            clicked = observation.element(int(step["input"]["element"]))
        button, text = _pressed(clicked)
        requests: list[dict[str, Any]] = []
        for index, request in enumerate(held):
            shown = request.as_dict()
            if index < SUBMISSIONS_MAX:
                shown["submission"] = request_submission(
                    method=request.method,
                    url=request.url,
                    body=request.body,
                    content_type=request.content_type,
                    form=request.form,
                    controls=controls,
                    button=button,
                    button_text=text,
                )
            requests.append(shown)
        action: dict[str, Any] = {"name": step["name"], "description": description, "requests": requests}
        if step["name"] in ("click", "type", "select"):
            action["element"] = step["input"]["element"]
        return await self.pause(step, Pause(CriticalPointKind.CONFIRM, question, action, digest), recorded=True)

    async def pause(self, step: dict[str, Any], pause: Pause, *, recorded: bool = False) -> bool:
        """Persist the checkpoint and the question, keep the context here, and let the worker slot go.

        `recorded`: the step is among the steps already (an action performed, whose
        requests were held); its result is the owner's answer.
        """
        from playwright.async_api import Error as PlaywrightError  # loads on first use

        assert self.session is not None
        point_id = uuid.uuid4()
        step["critical_point_id"] = str(point_id)
        step["result"] = None
        if not recorded:
            self.steps.append(step)
        session = self.session
        storage: dict[str, Any] | None
        try:
            storage = await asyncio.wait_for(session.storage_state(), ACTION_TIMEOUT)
            self.url = session.page.url
        except (TimeoutError, PlaywrightError):
            storage = None
        await db(browser_task_pause)(
            task_id=self.task_id,
            lease_token=self.claim.lease_token,
            progress=self.progress(),
            pause=pause,
            point_id=point_id,
            storage_state=storage,
        )
        self.session = None  # kept for the answer; no longer this attempt's
        await kept_sessions().keep(session, on_wake=self.on_wake)
        if pause.kind == CriticalPointKind.SIGN_IN:
            # What the owner's own input sends to the sign-in's site goes; nothing else.
            session.guard.owner_acts(page_url=session.page.url)
            live_view.live_view_start(session, conversation_id=self.claim.conversation_id, critical_point_id=point_id)
        return True
