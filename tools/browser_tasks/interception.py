"""The session's own interception of its page: every request asked about before it leaves, hops and beacons too.

Playwright's route (the context's, in `session.py`) is asked about the first request of each
fetch only: it lets the hops of a redirect through unasked, and the requests a document
sends while it unloads (a beacon, a keepalive fetch on `pagehide`), whose frame it no longer
knows. So the session also intercepts with the Fetch domain of Chromium's DevTools on its
page's own session: Chromium pauses every request of the page's target there (its frames of
the same process and its workers included), hops and unload beacons too, and this layer
asks the guard before any of them leaves. A held navigation is answered 204 (the frame
keeps its page, so the action can be repeated on it); any other held request fails. The
script a classic worker starts from is given `workers.prelude` on its way in.

Frames of other sites (out-of-process iframes) are targets of their own: they are attached
through the same DevTools session as they start, and are intercepted the same way once set
up (Playwright's route decides what they send before that). Workers the page starts are
attached too, and only let run.

Chromium pauses a request here before Playwright's own interception sees it (this session
attaches after Playwright's). What this layer lets through comes to Playwright's route next,
which asks the guard `again`; hops and unloading documents' requests it never sees (no
`echo`). Pages the task's page opens (pop-ups) are not followed: every request they make is
refused from the moment this layer attaches to them, and they are emptied, never closed
(closing runs their unload handlers, whose beacons no interception would see).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import itertools
import json
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from tools.browser_tasks.guard import Decision, RequestGuard
from tools.browser_tasks.workers import is_javascript, prelude
from tools.network.policy import Refused, url_check

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, CDPSession, Page

logger = logging.getLogger(__name__)

# Attach to the frames and workers a target starts, paused until this layer resumes them. Not
# flattened: Playwright's session object carries only its own session's messages, so a child's
# travel inside Target.sendMessageToTarget / receivedMessageFromTarget.
AUTO_ATTACH = {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": False}
EVERY_REQUEST = {"patterns": [{"urlPattern": "*"}]}
REFUSALS_KEPT = 20
REPLY_TIMEOUT = 10.0  # seconds a child target has to answer a command whose result is needed

Path = tuple[str, ...]  # the DevTools session ids from the page's session down to a child target


class PageInterception:
    """The Fetch-domain layer of one task page and of the frames and workers attached through it."""

    def __init__(self, cdp: CDPSession, guard: RequestGuard, refusals: list[str]) -> None:
        self._cdp = cdp
        self._guard = guard
        self._refusals = refusals
        self._ids = itertools.count(1)
        self._pending: set[asyncio.Future[None]] = set()
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}  # a child's answers, by command id

    async def start(self) -> None:
        """Intercept the page's requests and attach to its frames and workers (before it loads anything)."""
        self._cdp.on("Fetch.requestPaused", lambda event: self._paused((), event))
        self._cdp.on("Target.attachedToTarget", lambda event: self._attached((), event))
        self._cdp.on("Target.receivedMessageFromTarget", lambda event: self._from_child((), event))
        await self._cdp.send("Fetch.enable", EVERY_REQUEST)
        await self._cdp.send("Target.setAutoAttach", AUTO_ATTACH)

    def _paused(self, path: Path, event: dict[str, Any]) -> None:
        if "responseStatusCode" in event or "responseErrorReason" in event:
            self._later(path, self._respond(path, event))
            return
        # Decided at once, in the order Chromium paused the requests; only the answer is awaited.
        request = event.get("request") or {}
        resource_type = str(event.get("resourceType", "")).lower()
        decision, by_policy = self._decision(event, request, resource_type)
        request_id = event.get("requestId")
        answer: tuple[str, dict[str, Any]]
        if decision is Decision.SEND:
            # A worker's script is requested as "other": its answer is read on the way in.
            answer = ("Fetch.continueRequest", {"requestId": request_id, "interceptResponse": resource_type == "other"})
        elif resource_type == "document" and not by_policy:
            answer = ("Fetch.fulfillRequest", {"requestId": request_id, "responseCode": 204, "body": ""})
        else:
            answer = ("Fetch.failRequest", {"requestId": request_id, "errorReason": "BlockedByClient"})
        self._later(path, self._send(path, [answer]))

    async def _respond(self, path: Path, event: dict[str, Any]) -> None:
        """Let a response in; a worker's script (a JavaScript answer to an "other" request) with the prelude."""
        request_id = event.get("requestId")
        status = event.get("responseStatusCode")
        headers = [h for h in event.get("responseHeaders") or [] if isinstance(h, dict)]
        content_type = next(
            (str(h.get("value", "")) for h in headers if str(h.get("name", "")).lower() == "content-type"), ""
        )
        if not isinstance(status, int) or not 200 <= status < 300 or not is_javascript(content_type):
            await self._send(path, [("Fetch.continueResponse", {"requestId": request_id})])
            return
        try:
            got = await self._call(path, "Fetch.getResponseBody", {"requestId": request_id})
            body = base64.b64decode(got["body"]) if got.get("base64Encoded") else str(got["body"]).encode()
        except (KeyError, TypeError, ValueError, TimeoutError, binascii.Error):
            # Unread, it is not let in without the prelude.
            await self._send(path, [("Fetch.failRequest", {"requestId": request_id, "errorReason": "Failed"})])
            return
        kept = [h for h in headers if str(h.get("name", "")).lower() not in ("content-length", "content-encoding")]
        fulfil = {
            "requestId": request_id,
            "responseCode": status,
            "responseHeaders": kept,
            "body": base64.b64encode(prelude(body)).decode("ascii"),
        }
        await self._send(path, [("Fetch.fulfillRequest", fulfil)])

    def _decision(self, event: dict[str, Any], request: dict[str, Any], resource_type: str) -> tuple[Decision, bool]:
        """The guard's decision, and whether the network policy refused the address before it was asked."""
        url = str(request.get("url", ""))
        if url.partition(":")[0].lower() not in ("http", "https"):
            return Decision.SEND, False  # not for the network: Playwright's route refuses what the policy does not
        try:
            url_check(url)
        except Refused as refused:
            self._refusals.append(refused.message)
            del self._refusals[:-REFUSALS_KEPT]
            return Decision.REFUSE, True
        hop = bool(event.get("redirectedRequestId"))
        decision = self._guard.decide(
            method=str(request.get("method", "GET")),
            url=url,
            post_data=_post_data(request),
            content_type=_header(request.get("headers"), "content-type"),
            navigation=resource_type == "document",
            resource_type=resource_type,
            redirected=hop,
            # Playwright's route sees the request next, unless it is a hop or its document is unloading.
            echo=not hop and bool(event.get("networkId")),
        )
        return decision, False

    def _attached(self, path: Path, event: dict[str, Any]) -> None:
        session_id = event.get("sessionId")
        if not isinstance(session_id, str):
            return
        child = (*path, session_id)
        commands: list[tuple[str, dict[str, Any]]] = []
        if (event.get("targetInfo") or {}).get("type") == "iframe":
            commands += [("Fetch.enable", EVERY_REQUEST), ("Target.setAutoAttach", AUTO_ATTACH)]
        commands.append(("Runtime.runIfWaitingForDebugger", {}))
        self._later(child, self._send(child, commands))

    def _from_child(self, path: Path, event: dict[str, Any]) -> None:
        session_id = event.get("sessionId")
        try:
            message = json.loads(str(event.get("message", "")))
        except ValueError:
            return
        if not isinstance(session_id, str) or not isinstance(message, dict):
            return
        child = (*path, session_id)
        method, params = message.get("method"), message.get("params") or {}
        if method == "Fetch.requestPaused":
            self._paused(child, params)
        elif method == "Target.attachedToTarget":
            self._attached(child, params)
        elif method == "Target.receivedMessageFromTarget":
            self._from_child(child, params)
        elif message.get("id") in self._replies:
            reply = self._replies.pop(message["id"])
            if not reply.done():
                reply.set_result(message)
        elif "error" in message:
            logger.debug("a command to a child target of a task page failed: %s", message["error"])

    def _later(self, path: Path, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _send(self, path: Path, commands: list[tuple[str, dict[str, Any]]]) -> None:
        """Send commands in order to the page's session or to a child's; a gone target ends them."""
        from playwright.async_api import Error as PlaywrightError  # loads on first use

        for method, params in commands:
            try:
                if path:
                    await self._cdp.send(
                        "Target.sendMessageToTarget", self._wrapped(path, next(self._ids), method, params)
                    )
                else:
                    await self._cdp.send(method, params)
            except PlaywrightError:
                # The target or the context is gone, and its paused requests with it.
                logger.debug("a task page's target went away before %s", method)
                return

    async def _call(self, path: Path, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one command and return its result (raises ValueError when it failed or the target is gone)."""
        from playwright.async_api import Error as PlaywrightError  # loads on first use

        try:
            if not path:
                return dict(await self._cdp.send(method, params))
            command_id = next(self._ids)
            reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            self._replies[command_id] = reply
            try:
                await self._cdp.send("Target.sendMessageToTarget", self._wrapped(path, command_id, method, params))
                answer = await asyncio.wait_for(reply, REPLY_TIMEOUT)
            finally:
                self._replies.pop(command_id, None)
        except PlaywrightError as error:
            raise ValueError(f"{method} failed") from error
        if not isinstance(answer.get("result"), dict):
            raise ValueError(f"{method} failed")
        return dict(answer["result"])

    def _wrapped(self, path: Path, command_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The page session's Target.sendMessageToTarget that carries a command to a child, once per level."""
        message = json.dumps({"id": command_id, "method": method, "params": params})
        for session_id in reversed(path[1:]):
            carrier = {"sessionId": session_id, "message": message}
            message = json.dumps({"id": next(self._ids), "method": "Target.sendMessageToTarget", "params": carrier})
        return {"sessionId": path[0], "message": message}


async def popup_silence(context: BrowserContext, popup: Page) -> None:
    """Refuse every request a pop-up of the task's page makes from now on, and empty it."""
    from playwright.async_api import Error as PlaywrightError  # loads on first use

    try:
        cdp = await context.new_cdp_session(popup)

        def refuse(event: dict[str, Any]) -> None:
            answer = {"requestId": event.get("requestId"), "errorReason": "BlockedByClient"}
            task = asyncio.ensure_future(_quietly(cdp.send("Fetch.failRequest", answer)))
            _refusing.add(task)
            task.add_done_callback(_refusing.discard)

        cdp.on("Fetch.requestPaused", refuse)
        await cdp.send("Fetch.enable", EVERY_REQUEST)
        await cdp.send("Page.navigate", {"url": "about:blank"})
    except PlaywrightError:
        logger.debug("a pop-up of a task page closed before it was silenced")


_refusing: set[asyncio.Future[None]] = set()


async def _quietly(command: Awaitable[Any]) -> None:
    from playwright.async_api import Error as PlaywrightError  # loads on first use

    with contextlib.suppress(PlaywrightError):
        await command


def _header(headers: object, name: str) -> str:
    if not isinstance(headers, dict):
        return ""
    return next((str(value) for key, value in headers.items() if str(key).lower() == name), "")


def _post_data(request: dict[str, Any]) -> str | None:
    """The body's text, for its field names (Chromium gives it as text, or in base64 pieces)."""
    if isinstance(request.get("postData"), str):
        return str(request["postData"])
    pieces = []
    for entry in request.get("postDataEntries") or []:
        try:
            pieces.append(base64.b64decode(str(entry.get("bytes", ""))))
        except (binascii.Error, ValueError):
            return None
    return b"".join(pieces).decode("utf-8", "replace") if pieces else None
