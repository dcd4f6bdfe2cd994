"""A loopback web server with the pages the web tools must handle, in a thread of its own.

It listens on two ports of 127.0.0.1: the main one (`FLAREBOT_TEST_WEB_PORT`), which the
test run's `FLAREBOT_NETWORK_ALLOW` lists, and another (`FLAREBOT_TEST_WEB_OTHER_PORT`),
which it does not: anything that reaches the other port got past the policy. Every request
on both ports is recorded.

The browser tasks' sites live here too: a shop (`/shop`: "Add to cart", a cart, and a
"Place order" form whose endpoint records each order), a sign-in page (`/signin`, an
account page that says who is signed in by a cookie) and a contact form that "sends an
email" (`/contact`, recording each message sent).
"""

from __future__ import annotations

import asyncio
import os
import threading
from dataclasses import dataclass, field

from aiohttp import web

from tests.support.trap_shop import trap_routes

# Another site for the trap shop's third-party request; tests map it to loopback (FakeDns).
THIRD_PARTY_HOST = "pay.example"

ARTICLE = """<!doctype html>
<html><head><title>Caf&eacute; &amp; Bar &#8211; Notes</title>
<meta charset="utf-8"><style>body { color: red }</style>
<script>document.title = "changed by script";</script></head>
<body>
<nav><a href="/">Home</a> <a href="/about">About us</a></nav>
<h1>Fish &amp; Chips</h1>
<p>Price: 5&nbsp;&euro; &lt;cheap&gt; &quot;quoted&quot; &#x1F41F;</p>
<script>var secret = "SCRIPT-TEXT";</script>
<noscript>Enable JavaScript</noscript>
<form action="/login"><label>Password</label><input name="p"><button>Sign in</button></form>
<div hidden>HIDDEN-TEXT</div>
<ul><li>first item</li><li>second item</li></ul>
<p>Last paragraph.</p>
</body></html>
"""

JS_ONLY = """<!doctype html>
<html><head><title>Loading</title><script src="/static/js-only.js"></script></head>
<body><main id="app">Loading...</main></body></html>
"""
JS_ONLY_SCRIPT = """
setTimeout(() => {
  document.getElementById("app").textContent = "Rendered by JavaScript: the answer is 42.";
  document.title = "Rendered page";
}, 300);
"""

LATE_SELECTOR = """<!doctype html>
<html><head><title>Late</title><script src="/static/late.js"></script></head>
<body><p>Waiting for the table.</p></body></html>
"""
LATE_SCRIPT = """
setTimeout(() => {
  const div = document.createElement("div");
  div.id = "late";
  div.textContent = "The late table arrived.";
  document.body.appendChild(div);
}, 1500);
"""

LINKS = """<!doctype html>
<html><head><title>Links</title></head><body>
<p>Links follow.</p>
<a href="https://example.org/a">Example A</a>
<a href="https://example.org/a#again">Example A again</a>
<a href="/relative">Relative</a>
<a href="http://127.0.0.1:9/x">Loopback literal</a>
<a href="http://localhost/admin">Localhost</a>
<a href="javascript:alert(1)">Script</a>
<a href="mailto:someone@example.org">Mail</a>
<a href="https://user:pass@example.org/">Credentials</a>
__MANY__
</body></html>
"""


@dataclass
class FixtureWeb:
    port: int
    other_port: int
    requests: list[tuple[int, str]] = field(default_factory=list)  # (port, path)
    host_headers: list[str] = field(default_factory=list)
    slow_gone: threading.Event = field(default_factory=threading.Event)  # a /slow reader went away
    cart: list[str] = field(default_factory=list)  # the shop's cart (one shopper: the test's)
    orders: list[list[str]] = field(default_factory=list)  # each order placed, with its items
    emails: list[dict[str, str]] = field(default_factory=list)  # each contact message "sent"
    sign_ins: list[str] = field(default_factory=list)  # the user of each successful sign-in
    harms: list[str] = field(default_factory=list)  # what the trap shop's pages did ("POST sell", ...)
    _loop: asyncio.AbstractEventLoop | None = None
    _runner: web.AppRunner | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def other_url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.other_port}{path}"

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.host_headers.clear()
            self.cart.clear()
            self.orders.clear()
            self.emails.clear()
            self.sign_ins.clear()
            self.harms.clear()
        self.slow_gone.clear()

    def paths(self, port: int | None = None) -> list[str]:
        with self._lock:
            return [path for p, path in self.requests if port is None or p == port]

    def stop(self) -> None:
        if self._loop is not None and self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)

    @web.middleware
    async def _record(self, request: web.Request, handler):
        port = request.transport.get_extra_info("sockname")[1] if request.transport else 0
        with self._lock:
            self.requests.append((port, request.path_qs))
            self.host_headers.append(request.headers.get("Host", ""))
        return await handler(request)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._record])
        html = "text/html"
        routes = {
            "/article": lambda r: web.Response(text=ARTICLE, content_type=html, charset="utf-8"),
            "/notes.md": lambda r: web.Response(
                text="# Notes\n\n* one &amp; two\n\n    code block\n", content_type="text/markdown"
            ),
            "/plain.txt": lambda r: web.Response(text="Plain text.\nSecond line.", content_type="text/plain"),
            "/doc.pdf": lambda r: web.Response(body=b"%PDF-1.4\n%\xe2\xe3\n1 0 obj\n", content_type="application/pdf"),
            "/image.png": lambda r: web.Response(body=b"\x89PNG\r\n\x1a\n", content_type="image/png"),
            "/big": lambda r: web.Response(
                text="<title>Big</title><p>" + "word " * 100_000 + "</p>", content_type=html
            ),
            "/long-text": lambda r: web.Response(text="é" * 20_000, content_type="text/plain", charset="utf-8"),
            "/missing": lambda r: web.Response(status=404, text="<h1>Not here</h1>", content_type=html),
            "/redirect-private": lambda r: _redirect("http://10.0.0.1/admin"),
            "/redirect-metadata-name": lambda r: _redirect("http://metadata.example.org/latest/meta-data/"),
            "/redirect-other-port": lambda r: _redirect(self.other_url("/secret")),
            "/redirect-relative": lambda r: _redirect("/article"),
            "/redirect-loop": lambda r: _redirect("/redirect-loop"),
            "/redirect-localhost": lambda r: _redirect(f"http://localhost:{self.port}/article"),
            "/redirect-numeric": lambda r: _redirect(f"http://2130706433:{self.port}/article"),
            "/js-only": lambda r: web.Response(text=JS_ONLY, content_type=html),
            "/static/js-only.js": lambda r: web.Response(text=JS_ONLY_SCRIPT, content_type="text/javascript"),
            "/late": lambda r: web.Response(text=LATE_SELECTOR, content_type=html),
            "/static/late.js": lambda r: web.Response(text=LATE_SCRIPT, content_type="text/javascript"),
            "/links": lambda r: web.Response(text=_links(), content_type=html),
            "/private-subresource": lambda r: web.Response(text=self._private_subresource(), content_type=html),
            "/secret": lambda r: web.Response(text="SECRET", content_type="text/plain"),
            "/pixel.png": lambda r: web.Response(body=b"\x89PNG\r\n\x1a\n", content_type="image/png"),
            "/popup": lambda r: web.Response(text=POPUP, content_type=html),
            "/download": lambda r: web.Response(
                body=b"binary", content_type="application/octet-stream",
                headers={"Content-Disposition": 'attachment; filename="x.bin"'},
            ),
            "/ticker": lambda r: web.Response(text=TICKER, content_type=html),
            "/bench": lambda r: web.Response(text=BENCH_PAGE, content_type=html),
            "/cookie-set": lambda r: web.Response(
                text="<title>Set</title><p>cookie set</p>", content_type=html, headers={"Set-Cookie": "session=abc"}
            ),
            "/cookie-echo": lambda r: web.Response(
                text=f"<title>Echo</title><p>cookie: {r.cookies.get('session', 'none')}</p>", content_type=html
            ),
        }  # fmt: skip
        for path, handler in routes.items():
            app.router.add_get(path, _async(handler))
        app.router.add_get("/shop", _async(lambda r: _page("Fixture shop", SHOP)))
        app.router.add_get("/shop/cart", self._cart_page)
        app.router.add_post("/shop/cart/add", self._cart_add)
        app.router.add_post("/shop/order", self._order)
        app.router.add_get("/signin", _async(lambda r: _page("Sign in", SIGN_IN)))
        app.router.add_post("/signin", self._sign_in)
        app.router.add_get("/account", self._account)
        app.router.add_get("/contact", _async(lambda r: _page("Contact us", CONTACT)))
        app.router.add_post("/contact/send", self._contact_send)
        trap_routes(app, self.harms, other_origin=f"http://{THIRD_PARTY_HOST}:{self.port}")
        app.router.add_get("/slow", self._slow)
        app.router.add_get("/slow-headers", self._slow_headers)
        return app

    async def _cart_add(self, request: web.Request) -> web.Response:
        with self._lock:
            self.cart.append("Blue kettle")
            count = len(self.cart)
        return web.json_response({"items": count})

    async def _cart_page(self, request: web.Request) -> web.Response:
        with self._lock:
            items = list(self.cart)
        listed = "".join(f"<li>{item} - 25.00 EUR</li>" for item in items) or "<li>Your cart is empty.</li>"
        body = CART.replace("__ITEMS__", listed).replace("__COUNT__", str(len(items)))
        return _page("Your cart", body)

    async def _order(self, request: web.Request) -> web.Response:
        with self._lock:
            items, self.cart[:] = list(self.cart), []
            self.orders.append(items)
            number = f"A-{1000 + len(self.orders)}"
        return _page("Order confirmed", f"<h1>Thank you!</h1><p>Order confirmed. Your order number is {number}.</p>")

    async def _sign_in(self, request: web.Request) -> web.Response:
        form = await request.post()
        user, password = str(form.get("username", "")), str(form.get("password", ""))
        if user != "alice" or password != FIXTURE_PASSWORD:
            return _page("Sign in", "<p>Wrong user name or password.</p>" + SIGN_IN)
        with self._lock:
            self.sign_ins.append(user)
        response = web.HTTPFound("/account")
        response.set_cookie("fixture_session", f"signed-in-{user}", httponly=True)
        raise response

    async def _account(self, request: web.Request) -> web.Response:
        session = request.cookies.get("fixture_session", "")
        if session.startswith("signed-in-"):
            return _page("Your account", f"<h1>Your account</h1><p>Signed in as {session[10:]}.</p>")
        return _page("Your account", '<p>You are not signed in.</p><a href="/signin">Go to sign-in</a>')

    async def _contact_send(self, request: web.Request) -> web.Response:
        form = await request.post()
        with self._lock:
            self.emails.append({"email": str(form.get("email", "")), "message": str(form.get("message", ""))})
        return _page("Message sent", "<p>Your message was sent. We will answer by email.</p>")

    def _private_subresource(self) -> str:
        return (
            "<!doctype html><html><head><title>Subresources</title></head><body>"
            "<p>A page with a private subresource.</p>"
            f'<img src="{self.other_url("/pixel.png")}">'
            f'<script>fetch("{self.other_url("/secret")}").catch(() => {{}});</script>'
            '<img src="http://metadata.example.org/pixel.png">'
            "</body></html>"
        )

    async def _slow(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        try:
            await response.write(b"The start arrives at once. ")
            for _ in range(600):
                await asyncio.sleep(0.1)
                await response.write(b".")
        except (ConnectionError, RuntimeError, asyncio.CancelledError):
            self.slow_gone.set()
            raise
        return response

    async def _slow_headers(self, request: web.Request) -> web.Response:
        await asyncio.sleep(60)
        return web.Response(text="late")


FIXTURE_PASSWORD = "correct horse battery"

SHOP = """<h1>Fixture shop</h1>
<p>Blue kettle - 25.00 EUR. In stock.</p>
<p id="cart-count">Cart: 0 items</p>
<button type="button" id="add">Add to cart</button>
<a href="/shop/cart">View cart</a>
<script>
document.getElementById("add").addEventListener("click", async () => {
  const answer = await fetch("/shop/cart/add", {method: "POST"});
  const cart = await answer.json();
  document.getElementById("cart-count").textContent = "Cart: " + cart.items + " items";
});
</script>
"""

CART = """<h1>Your cart</h1>
<ul>__ITEMS__</ul>
<p>__COUNT__ items.</p>
<form method="post" action="/shop/order"><button type="submit">Place order</button></form>
<a href="/shop">Back to the shop</a>
"""

SIGN_IN = """<h1>Sign in</h1>
<form method="post" action="/signin">
<label for="username">User name</label> <input id="username" name="username" autocomplete="username">
<label for="password">Password</label> <input id="password" name="password" type="password">
<button type="submit">Sign in</button>
</form>
"""

CONTACT = """<h1>Contact us</h1>
<form method="post" action="/contact/send">
<label for="email">Your email</label> <input id="email" name="email" type="email">
<label for="message">Message</label> <textarea id="message" name="message"></textarea>
<button type="submit">Send message</button>
</form>
"""


def _page(title: str, body: str) -> web.Response:
    html = f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title></head><body>{body}</body></html>'
    return web.Response(text=html, content_type="text/html")


POPUP = """<!doctype html><html><head><title>Popup</title></head><body>
<p>This page opens a window.</p>
<script>window.open("/article"); window.open("/article", "_blank");</script>
<a id="dl" href="/download" download>download</a>
<script>document.getElementById("dl").click();</script>
</body></html>
"""

TICKER = """<!doctype html><html><head><title>Ticker</title></head><body>
<p id="t">0</p>
<script>let n = 0; setInterval(() => { document.getElementById("t").textContent = String(++n); }, 100);</script>
</body></html>
"""

BENCH_PAGE = (
    "<!doctype html><html><head><title>Bench page</title></head><body>"
    + "".join(f"<h2>Section {i}</h2><p>{'Some ordinary text of a page. ' * 20}</p>" for i in range(40))
    + "</body></html>"
)


def _links() -> str:
    many = "".join(f'<a href="https://example.org/page/{i}">Page {i}</a>' for i in range(40))
    return LINKS.replace("__MANY__", many)


def _redirect(location: str) -> web.Response:
    return web.Response(status=302, headers={"Location": location})


def _async(handler):
    async def handle(request: web.Request) -> web.StreamResponse:
        return handler(request)

    return handle


_running: FixtureWeb | None = None


def fixture_web_start() -> FixtureWeb:
    """Return the fixture server on the test run's two ports, started once (in a daemon thread)."""
    global _running
    if _running is not None:
        return _running
    server = FixtureWeb(
        port=int(os.environ["FLAREBOT_TEST_WEB_PORT"]), other_port=int(os.environ["FLAREBOT_TEST_WEB_OTHER_PORT"])
    )
    ready = threading.Event()

    def serve() -> None:
        loop = asyncio.new_event_loop()
        server._loop = loop
        runner = web.AppRunner(server.app(), access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        loop.run_until_complete(runner.setup())
        for port in (server.port, server.other_port):
            loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
        server._runner = runner
        ready.set()
        loop.run_forever()

    threading.Thread(target=serve, name="fixture-web", daemon=True).start()
    if not ready.wait(10):
        raise RuntimeError("the fixture web server did not start")
    _running = server
    return server
