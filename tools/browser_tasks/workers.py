"""What a task page's scripts may start: no shared worker, no WebSocketStream, and workers without WebSocket.

Playwright's WebSocket route (`session.py`) reaches the sockets of pages and frames only: a
worker's socket, a `WebSocketStream` and anything a shared worker (a target of the browser,
not of the page) sends would leave unasked. Nor can the worker be stopped in time from
outside: Chromium starts it as soon as Playwright, attached before the session's own
DevTools session, lets it run. So `PAGE_SCRIPT` runs in every frame of a task's context
before the page's own scripts (Playwright's init script) and takes those away, and every
worker the page starts runs the same script first (`prelude`), which takes away its
`WebSocket` too and does the same to the workers it starts:

- a worker from a `blob:` or `data:` URL, or a module worker, is started from a `blob:` that
  runs the script first and then the worker's own (read at once, so a URL the page revokes
  right after is no matter; a module imports its own URL, so its relative imports still
  resolve, but its `location` is the `blob:`);
- a classic worker from its site's URL keeps its URL: its script gets the prelude on its
  way in (`interception.py` answers Chromium's request for it with `prelude(body)`), so
  relative URLs in it resolve as before.

A page can no longer start a shared worker or a `WebSocketStream` at all.
"""

from __future__ import annotations

import re

PAGE_SCRIPT = r"""(function flarebotSenders() {
  // Everything it uses is taken before the page's scripts run: they may change the globals after.
  const g = globalThis;
  const { apply, construct, defineProperty } = Reflect;
  const source = "(" + apply(Function.prototype.toString, flarebotSenders, []) + ")();";
  const inWorker = typeof WorkerGlobalScope !== "undefined" && g instanceof WorkerGlobalScope;
  const taken = inWorker ? ["WebSocket", "WebSocketStream", "SharedWorker"] : ["WebSocketStream", "SharedWorker"];
  for (let i = 0; i < taken.length; i++) {
    try { delete g[taken[i]]; } catch (e) { g[taken[i]] = undefined; }
  }
  const Native = g.Worker;
  if (typeof Native !== "function") return;
  const { stringify } = JSON;
  const S = String, U = URL, B = Blob, X = XMLHttpRequest, O = Object;
  const createObjectURL = U.createObjectURL, exec = RegExp.prototype.exec;
  const hrefOf = O.getOwnPropertyDescriptor(U.prototype, "href").get;
  const protocolOf = O.getOwnPropertyDescriptor(U.prototype, "protocol").get;
  const { open, send } = X.prototype;
  const responseTextOf = O.getOwnPropertyDescriptor(X.prototype, "responseText").get;
  const baseOf = inWorker ? () => g.location.href : () => g.document.baseURI;
  // A Trusted Types URL stays one for the worker it starts (a page that enforces them refuses strings).
  const types = g.trustedTypes;
  const isScriptURL = types && types.isScriptURL ? apply(Function.prototype.bind, types.isScriptURL, [types]) : null;
  const trustedText = typeof TrustedScriptURL === "function" ? TrustedScriptURL.prototype.toString : null;
  const asBlob = (text) => apply(createObjectURL, U, [new B([text], { type: "text/javascript" })]);
  const read = (href) => {
    const request = new X();
    apply(open, request, ["GET", href, false]);
    apply(send, request, []);
    return apply(responseTextOf, request, []);
  };
  const STRICT = /^\s*(["'])use strict\1;?/;
  let preludeModule = null;
  const Wrapped = new Proxy(Native, {
    construct(target, args, newTarget) {
      // The URL and the options are read once: what is checked is what starts.
      const given0 = args[0];
      const trusted = !!isScriptURL && !!trustedText && isScriptURL(given0);
      const url = construct(U, [trusted ? apply(trustedText, given0, []) : S(given0), baseOf()]);
      const href = apply(hrefOf, url, []), protocol = apply(protocolOf, url, []);
      const given = args[1] === undefined || args[1] === null ? {} : O(args[1]);
      const options = { type: given.type === "module" ? "module" : "classic" };
      const credentials = given.credentials, name = given.name;
      if (credentials !== undefined) options.credentials = credentials;
      if (name !== undefined) options.name = name;
      const local = protocol === "blob:" || protocol === "data:";
      if (options.type === "classic" && !local) return construct(target, [trusted ? given0 : href, options], newTarget);
      let text;
      if (options.type === "module") {
        preludeModule = preludeModule || asBlob(source);
        text = "import " + stringify(preludeModule) + ";\n" + (local ? read(href) : "import " + stringify(href) + ";");
      } else {
        const own = S(read(href));
        const found = apply(exec, STRICT, [own]);
        const head = found ? S(found[0]) : "";
        text = head + source + "\n" + own.substring(head.length);
      }
      return construct(target, [asBlob(text), options], newTarget);
    },
  });
  defineProperty(Native.prototype, "constructor", { value: Wrapped, writable: true, configurable: true });
  g.Worker = Wrapped;
})();"""

_STRICT = re.compile(rb"""^(\xef\xbb\xbf)?\s*(["'])use strict\2;?""")
_JAVASCRIPT = re.compile(r"^\s*(?:text|application)/(?:x-)?(?:java|ecma)script\s*(?:;|$)", re.IGNORECASE)


def prelude(body: bytes) -> bytes:
    """A classic worker's script with `PAGE_SCRIPT` run first (after its byte-order mark and "use strict")."""
    kept = _STRICT.match(body)
    head = kept.group(0) if kept else (b"\xef\xbb\xbf" if body.startswith(b"\xef\xbb\xbf") else b"")
    return head + PAGE_SCRIPT.encode() + b"\n" + body[len(head) :]


def is_javascript(content_type: str) -> bool:
    """Whether a response's Content-Type is one Chromium runs as a worker's script."""
    return bool(_JAVASCRIPT.match(content_type))
