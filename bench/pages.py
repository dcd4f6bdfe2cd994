"""Page benchmark: the chat page with a realistic history, and the settings page, in Chromium.

    .venv/bin/python bench/pages.py                  # 10 cold and 10 warm loads of each page
    .venv/bin/python bench/pages.py --runs 20 --database sqlite

Starts the private stack of bench/harness.py, seeds its database through the ORM (50
conversations; the newest holds 100 completed turns, i.e. a 200-message transcript of
Markdown answers with tables, task lists and code blocks in five languages, with the turn
rows and event log a real run leaves), then loads `/`
and `/settings/` in Debian's Chromium through Playwright. A cold load is a fresh browser
context (empty cache); a warm load navigates again in the same context. Printed and
written to bench/results/pages.json:
- first render: navigation start to first contentful paint (`performance` paint entries);
- interactive: navigation start to the frame after the page says it is ready, i.e.
  `document.body.dataset.ready === "1"`, or, for a chat page that sets no marker, the
  selected conversation's 200 messages in the DOM with the composer enabled;
- our own JS and CSS (files under /static/flarebot/ that each page loaded): bytes
  uncompressed, bytes transferred (with the vendored markdown-it, which the first
  transcript needs), and what gzip would make of them; the vendored ones
  (/static/vendor/: markdown-it, and highlight.js with the grammars the transcript needs)
  the same way, apart; plus every byte the cold load transferred (document, assets, API
  responses).
Targets: first render under 300 ms on loopback, own JS+CSS under 100 KB uncompressed.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import http.server
import json
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import PASSWORD, ROOT, BenchStack, start
from bench.stream import percentile

if TYPE_CHECKING:
    from playwright._impl._api_structures import StorageState
    from playwright.sync_api import Browser, Error, Page, Response

CHROMIUM = os.environ.get("FLAREBOT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CONVERSATIONS = 50
TURNS = 100  # 200 messages
OWN_ASSETS = "/static/flarebot/"
VENDOR_ASSETS = "/static/vendor/"  # markdown-it, and highlight.js once a code block shows
TARGET_FIRST_RENDER_MS = 300.0
TARGET_OWN_BYTES = 100 * 1024
TIMEOUT_MS = 30_000
# Milestones of a load, ms from navigation start: response began, own CSS in, first
# contentful paint, own JS in, API responses in, interactive.
STAGES = ("ttfb", "css_loaded", "first_render", "js_loaded", "api_loaded", "interactive")

# Runs before any script of the page: note when the page first counts as interactive, and
# when the frame after that has been painted (a requestAnimationFrame, then a task).
PROBE = """
(() => {
  const expected = EXPECTED;
  const probe = { ready: null, painted: null, how: null };
  Object.defineProperty(window, "__pagesBench", { value: probe });
  const interactive = () => {
    if (document.body && document.body.dataset.ready === "1") return "marker";
    const composer = document.getElementById("composer-input");
    if (expected && composer && !composer.disabled &&
        document.querySelectorAll("#transcript [data-message-id]").length >= expected) return "transcript";
    return null;
  };
  const observer = new MutationObserver(() => {
    if (probe.ready !== null) return;
    const how = interactive();
    if (!how) return;
    probe.ready = performance.now();
    probe.how = how;
    observer.disconnect();
    requestAnimationFrame(() => setTimeout(() => { probe.painted = performance.now(); }, 0));
  });
  observer.observe(document, { childList: true, subtree: true, attributes: true });
})();
"""

TIMINGS = """
() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const fcp = performance.getEntriesByType("paint").find((e) => e.name === "first-contentful-paint");
  const resources = performance.getEntriesByType("resource");
  // What the page needs to show itself: highlight.js comes later, with the first code block.
  const needed = (path) => path.startsWith("/static/") && !path.startsWith("/static/vendor/highlight/");
  const own = resources.filter((r) => needed(new URL(r.name).pathname));
  const sum = (list, key) => list.reduce((total, r) => total + (r[key] || 0), 0);
  const end = (list) => list.reduce((latest, r) => Math.max(latest, r.responseEnd), 0) || null;
  const api = resources.filter((r) => new URL(r.name).pathname.startsWith("/api/"));
  return {
    ttfb: nav.responseStart,
    css_loaded: end(own.filter((r) => r.name.endsWith(".css"))),
    js_loaded: end(own.filter((r) => r.name.endsWith(".js"))),
    api_loaded: end(api),
    api_calls: api.map((r) => ({
      path: new URL(r.name).pathname.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, "{id}"),
      start: r.startTime,
      server: r.responseStart - r.requestStart,
      duration: r.responseEnd - r.startTime,
      bytes: r.encodedBodySize,
    })),
    dom_content_loaded: nav.domContentLoadedEventEnd,
    first_render: fcp ? fcp.startTime : null,
    ready: window.__pagesBench.ready,
    interactive: window.__pagesBench.painted,
    how: window.__pagesBench.how,
    messages: document.querySelectorAll("#transcript [data-message-id]").length,
    own_transferred: sum(own, "transferSize"),
    own_encoded: sum(own, "encodedBodySize"),
    total_transferred: nav.transferSize + sum(resources, "transferSize"),
  };
}
"""


# ---- Seeding ---------------------------------------------------------------------------

TOPICS = [
    ("Postgres vacuum", "autovacuum", "VACUUM (VERBOSE, ANALYZE) orders;"),
    ("Rust lifetimes", "borrow checker", "fn longest<'a>(x: &'a str, y: &'a str) -> &'a str { x }"),
    ("Sourdough starter", "hydration", "flour: 100 g\nwater: 100 g\nstarter: 20 g"),
    ("Celery retries", "acks_late", "@app.task(acks_late=True, max_retries=3)\ndef send(): ..."),
    ("Trip to Lisbon", "itinerary", "day 1: Alfama, day 2: Belém, day 3: Sintra"),
    ("CSS grid", "minmax", ".grid { grid-template-columns: repeat(auto-fill, minmax(12rem, 1fr)); }"),
]


# The fence language of each topic's code (highlighted once the page loads the highlighter).
LANGUAGES = ["sql", "rust", "yaml", "python", "text", "css"]


def _question(turn: int) -> str:
    topic, term, _ = TOPICS[turn % len(TOPICS)]
    return f"Turn {turn}: about {topic.lower()}, can you explain {term} and show a short example? Keep it practical."


def _answer(turn: int) -> str:
    topic, term, code = TOPICS[turn % len(TOPICS)]
    lang = LANGUAGES[turn % len(TOPICS)]
    return (
        f"## {topic}: {term}\n\n"
        f"Here is the short version for turn {turn}. **{term.capitalize()}** matters because it decides "
        f"how the work is split and *when* it happens. Three things to keep in mind:\n\n"
        f"1. Start from the defaults and measure before tuning `{term}`.\n"
        f"2. Change one setting at a time, and write down why.\n"
        f"3. Keep the [official documentation](https://example.org/{term.replace(' ', '-')}) at hand.\n\n"
        f"```{lang}\n{code}\n```\n\n"
        f"| Setting | Default | When to change |\n| :--- | :---: | ---: |\n"
        f"| `{term}` | on | after measuring |\n| retries | 3 | rarely |\n| timeout | 30 s | for slow peers |\n\n"
        f"- [x] Cost: small, once it is set up\n"
        f"- [ ] Risk: low, as long as you `test` it first\n\n"
        f"> A rule of thumb: if you cannot explain a setting, leave it at its default.\n\n"
        f"Tell me if you want the longer version with the trade-offs."
    )


def seed(bench: BenchStack) -> tuple[str, int]:
    """Fill the bench database; return the selected (newest) conversation's id and its message count."""
    for name in list(os.environ):
        if name not in bench.env:
            del os.environ[name]
    os.environ.update(bench.env)
    import django

    django.setup()
    from django.db import transaction
    from django.utils import timezone

    from conversations.eventlog import NewEvent, events_append
    from conversations.models import Conversation, Message, MessageRole, Turn, TurnStatus
    from conversations.providers.catalog import ANTHROPIC_MODELS
    from conversations.serializers import message_json
    from conversations.services import conversation_create

    names = [f"{TOPICS[i % len(TOPICS)][0]} #{i}" for i in range(CONVERSATIONS)]
    conversations = [conversation_create(name=name) for name in names]
    selected = conversations[-1]  # the newest: `/` opens it
    start_at = timezone.now() - timedelta(days=2)
    with transaction.atomic():
        turns: list[Turn] = []
        messages: list[Message] = []
        for ordinal in range(1, TURNS + 1):
            at = start_at + timedelta(minutes=5 * ordinal)
            turn = Turn(
                conversation=selected,
                ordinal=ordinal,
                request_id=uuid.uuid4(),
                status=TurnStatus.COMPLETED,
                attempts=1,
                steps=1,
                provider="anthropic",
                model=ANTHROPIC_MODELS[0],
                started_at=at,
                finished_at=at + timedelta(seconds=8),
            )
            user = Message(
                conversation=selected,
                turn=turn,
                role=MessageRole.USER,
                ordinal=2 * ordinal,
                parts=[{"type": "text", "text": _question(ordinal)}],
            )
            assistant = Message(
                conversation=selected,
                turn=turn,
                role=MessageRole.ASSISTANT,
                ordinal=2 * ordinal + 1,
                parts=[{"type": "text", "text": _answer(ordinal), "step": 0}],
            )
            turns.append(turn)
            messages += [user, assistant]
        Turn.objects.bulk_create(turns)
        Message.objects.bulk_create(messages)
        events: list[NewEvent] = []
        for turn, user, assistant in zip(turns, messages[::2], messages[1::2], strict=True):
            events += [
                ("turn.queued", turn.id, {"request_id": str(turn.request_id), "message": message_json(user)}),
                ("turn.started", turn.id, {"attempt": 1}),
                ("text.delta", turn.id, {"text": assistant.parts[0]["text"], "message_id": str(assistant.id)}),
                ("turn.completed", turn.id, {}),
            ]
        events_append(conversation_id=selected.id, events=events)  # numbers them, bumps last_sequence
        Conversation.objects.filter(id=selected.id).update(last_turn_ordinal=TURNS)
    # `/` opens the conversation with the newest updated_at; make that the seeded one for sure.
    Conversation.objects.filter(id=selected.id).update(updated_at=timezone.now())
    return str(selected.id), 2 * TURNS


# ---- Measuring -------------------------------------------------------------------------


@dataclass
class PageFigures:
    path: str
    cold: list[dict[str, Any]] = field(default_factory=list)
    warm: list[dict[str, Any]] = field(default_factory=list)
    assets: dict[str, int] = field(default_factory=dict)  # path -> uncompressed bytes
    errors: list[str] = field(default_factory=list)

    def watch(self, page: Page, *, assets: bool) -> None:
        """Record the page's errors and, if asked, the size of each own asset it loads."""

        def on_error(error: Error) -> None:
            self.errors.append(f"pageerror: {error}")

        def on_console(message: Any) -> None:
            if message.type == "error":
                self.errors.append(message.text)

        def on_response(response: Response) -> None:
            path = urlparse(response.url).path
            if path.startswith((OWN_ASSETS, VENDOR_ASSETS)) and response.status == 200:
                self.assets[path] = len(response.body())

        page.on("pageerror", on_error)
        page.on("console", on_console)
        if assets:
            page.on("response", on_response)


def _signed_in_state(browser: Browser, bench: BenchStack) -> StorageState:
    """Sign in through the real sign-in form once; later contexts start with its cookies."""
    context = browser.new_context(base_url=bench.base_url)
    context.set_default_timeout(2 * TIMEOUT_MS)
    page = context.new_page()
    page.goto("/login/")
    page.fill("input[name=username]", "bench")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: not url.endswith("/login/"))
    state = context.storage_state()
    context.close()
    return state


def _load(page: Page, figures: PageFigures, url: str, expected: int, record: list[dict[str, Any]]) -> None:
    page.goto(url, wait_until="load")
    page.wait_for_function("() => window.__pagesBench.painted !== null", timeout=TIMEOUT_MS)
    timings = page.evaluate(TIMINGS)
    if expected and timings["messages"] < expected:
        figures.errors.append(f"{url}: {timings['messages']} of {expected} messages shown")
    record.append(timings)


BASELINE_HTML = (
    b'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Baseline</title></head>'
    b"<body><h1>Baseline</h1><p>A static page from a trivial server: the browser's own floor.</p>"
    b'<script>document.body.dataset.ready = "1";</script></body></html>'
)


class _BaselineHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = BASELINE_HTML if self.path == "/" else b""
        self.send_response(200 if body else 204)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(ConnectionError):  # the browser may drop a request it no longer needs
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def measure(bench: BenchStack, runs: int, selected: str, messages: int) -> list[PageFigures]:
    from playwright.sync_api import sync_playwright

    baseline_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _BaselineHandler)
    threading.Thread(target=baseline_server.serve_forever, daemon=True).start()
    baseline_url = f"http://127.0.0.1:{baseline_server.server_address[1]}"
    results = [PageFigures("baseline"), PageFigures("/"), PageFigures("/settings/")]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            signed_in = _signed_in_state(browser, bench)
            for figures in results:
                expected = messages if figures.path == "/" else 0
                is_baseline = figures.path == "baseline"
                for run in range(runs + 1):  # the first load warms the server up and is not counted
                    context = browser.new_context(
                        base_url=baseline_url if is_baseline else bench.base_url,
                        viewport={"width": 1280, "height": 800},
                        storage_state=None if is_baseline else signed_in,
                    )
                    page = context.new_page()
                    page.add_init_script(PROBE.replace("EXPECTED", str(expected)))
                    figures.watch(page, assets=run == 1)
                    path = "/" if is_baseline else figures.path
                    _load(page, figures, path, expected, figures.cold if run else [])
                    if figures.path == "/" and f"c={selected}" not in page.url:
                        figures.errors.append(f"/ opened {page.url}, not the seeded conversation")
                    if run:
                        warm = context.new_page()
                        figures.watch(warm, assets=False)
                        warm.add_init_script(PROBE.replace("EXPECTED", str(expected)))
                        _load(warm, figures, path, expected, figures.warm)
                    context.close()
        finally:
            browser.close()
            baseline_server.shutdown()
    return results


def summarize(figures: PageFigures) -> dict[str, Any]:
    def stats(records: list[dict[str, Any]], key: str) -> dict[str, float | None]:
        values = [r[key] for r in records if r.get(key) is not None]
        if not values:
            return {"p50": None, "p95": None}
        return {"p50": round(percentile(values, 50), 1), "p95": round(percentile(values, 95), 1)}

    calls: dict[str, list[dict[str, float]]] = {}
    for record in figures.cold:
        for call in record["api_calls"]:
            calls.setdefault(call["path"], []).append(call)
    api = {
        path: {key: stats(entries, key)["p50"] for key in ("start", "server", "duration", "bytes")}
        for path, entries in sorted(calls.items())
    }
    first_cold = figures.cold[0] if figures.cold else {}
    own = {path: size for path, size in figures.assets.items() if path.startswith(OWN_ASSETS)}
    vendored = {path: size for path, size in figures.assets.items() if path.startswith(VENDOR_ASSETS)}

    def gzipped(paths: dict[str, int]) -> int:
        return sum(len(gzip.compress((ROOT / path.lstrip("/")).read_bytes())) for path in paths)

    return {
        "path": figures.path,
        "cold": {key: stats(figures.cold, key) for key in STAGES},
        "warm": {key: stats(figures.warm, key) for key in STAGES},
        "api_cold_p50": api,
        "interactive_by": sorted({r["how"] for r in figures.cold + figures.warm}),
        "own_assets": own,
        "own_bytes": sum(own.values()),
        "own_bytes_transferred": first_cold.get("own_transferred"),
        "own_bytes_gzip": gzipped(own),
        "vendored_assets": vendored,
        "vendored_bytes": sum(vendored.values()),
        "vendored_bytes_gzip": gzipped(vendored),
        "total_transferred_cold": first_cold.get("total_transferred"),
        "errors": sorted(set(figures.errors)),
    }


def http_round_trips(bench: BenchStack, selected: str, runs: int) -> dict[str, float]:
    """Time sequential GETs without a browser (p50 ms): what daphne and Django add per request."""
    paths = [
        "/",
        "/settings/",
        "/static/flarebot/base.css",
        "/api/conversations/",
        f"/api/conversations/{selected}/messages/",
        "/api/settings/model/",
        "/api/settings/instructions/",
    ]
    figures: dict[str, float] = {}
    with bench.client() as client:
        for path in paths:
            durations = []
            for _ in range(max(runs, 5) + 1):
                began = time.perf_counter()
                client.get(path).raise_for_status()
                durations.append((time.perf_counter() - began) * 1000)
            figures[path.replace(selected, "{id}")] = round(percentile(durations[1:], 50), 1)
    return figures


def own_files_on_disk() -> dict[str, int]:
    folder = ROOT / "static" / "flarebot"
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.suffix in (".js", ".css")}


def _ms(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}ms"


def report(pages: list[dict[str, Any]], *, runs: int, messages: int) -> int:
    """Print the figures; return the bytes of own JS+CSS the two pages load together."""
    print(f"{runs} cold + {runs} warm loads per page; {CONVERSATIONS} conversations, {messages} messages in `/`")
    one, five, fifteen = os.getloadavg()
    print(f"load average now: {one:.1f} {five:.1f} {fifteen:.1f} on {os.cpu_count()} CPUs (noisy when busy)")
    print(f"{'page':<11} {'load':<5} {'ttfb p50':>9} {'render p50':>11} {'render p95':>11} "
          f"{'inter p50':>10} {'inter p95':>10}")  # fmt: skip
    for page in pages:
        for load in ("cold", "warm"):
            ttfb, render, inter = (page[load][key] for key in ("ttfb", "first_render", "interactive"))
            print(
                f"{page['path']:<11} {load:<5} {_ms(ttfb['p50']):>9} {_ms(render['p50']):>11} "
                f"{_ms(render['p95']):>11} {_ms(inter['p50']):>10} {_ms(inter['p95']):>10}"
            )
    print("cold milestones, p50 ms from navigation start: " + ", ".join(STAGES))
    for page in pages:
        print(f"{page['path']:<11} " + " / ".join(_ms(page["cold"][key]["p50"], 0) for key in STAGES))
    for page in pages:
        for path, call in page["api_cold_p50"].items():
            print(
                f"{page['path']:<11} {path}: starts {_ms(call['start'], 0)}, server {_ms(call['server'], 0)}, "
                f"done after {_ms(call['duration'], 0)}, {call['bytes'] or 0:,.0f} B"
            )
    app_pages = [page for page in pages if page["path"] != "baseline"]
    for page in app_pages:
        print(
            f"{page['path']:<11} own JS+CSS {page['own_bytes']:,} B uncompressed, "
            f"{page['own_bytes_transferred']:,} B transferred ({page['own_bytes_gzip']:,} B gzipped); "
            f"whole cold load {page['total_transferred_cold']:,} B transferred; "
            f"interactive by {'/'.join(page['interactive_by'])}"
        )
        print(f"{'':<11} {', '.join(f'{Path(p).name} {s:,}' for p, s in page['own_assets'].items())}")
        if page["vendored_assets"]:
            print(
                f"{'':<11} vendored {page['vendored_bytes']:,} B ({page['vendored_bytes_gzip']:,} B gzipped): "
                + ", ".join(f"{p.removeprefix(VENDOR_ASSETS)} {s:,}" for p, s in page["vendored_assets"].items())
            )
        for error in page["errors"]:
            print(f"{'':<11} ERROR {error}")
    union = {path: size for page in app_pages for path, size in page["own_assets"].items()}
    own_total = sum(union.values())
    chat = next(page for page in pages if page["path"] == "/")
    render_p95 = chat["cold"]["first_render"]["p95"]
    met = {True: "met", False: "MISSED"}
    print(
        f"chat + settings own JS+CSS {own_total:,} B (target < {TARGET_OWN_BYTES:,}: "
        f"{met[own_total < TARGET_OWN_BYTES]}); all JS+CSS in static/flarebot {sum(own_files_on_disk().values()):,} B"
    )
    print(f"/ cold first render p95 {_ms(render_p95)} (target < {TARGET_FIRST_RENDER_MS:.0f} ms: "
          f"{met[render_p95 is not None and render_p95 < TARGET_FIRST_RENDER_MS]})")  # fmt: skip
    return own_total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="cold loads (and as many warm ones) per page")
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} is missing: scripts/ensure-chromium.sh installs it")
    bench = start(database=args.database)
    try:
        selected, messages = seed(bench)
        pages = [summarize(f) for f in measure(bench, args.runs, selected, messages)]
        round_trips = http_round_trips(bench, selected, args.runs)
    finally:
        bench.stop()
    own_total = report(pages, runs=args.runs, messages=messages)
    print("HTTP round trips without a browser, p50: " + ", ".join(f"{p} {ms:.1f}ms" for p, ms in round_trips.items()))
    out = Path(__file__).resolve().parent / "results" / "pages.json"
    out.parent.mkdir(exist_ok=True)
    summary = {
        "database": args.database,
        "runs": args.runs,
        "conversations": CONVERSATIONS,
        "messages": messages,
        "own_bytes_chat_and_settings": own_total,
        "load_average_at_end": os.getloadavg(),
        "own_files_on_disk": own_files_on_disk(),
        "targets": {"first_render_ms": TARGET_FIRST_RENDER_MS, "own_bytes": TARGET_OWN_BYTES},
    }
    out.write_text(json.dumps({**summary, "pages": pages, "http_round_trips_ms_p50": round_trips}, indent=2))
    print(f"written {out}")


if __name__ == "__main__":
    main()
