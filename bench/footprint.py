"""Footprint benchmark (issue 30): the `make run` stack's memory and start time on its defaults.

    .venv/bin/python bench/footprint.py             # start, idle, after 20 streams
    .venv/bin/python bench/footprint.py --streams 0 # start and idle only

It starts Flarebot exactly as `make run` does (`make --no-print-directory run` in this
checkout, installed already: a warm start), on its defaults: SQLite in a fresh data dir,
the private Redis `make run` starts, the worker processes it picks. A loopback
OpenAI-compatible model (FLAREBOT_LOCAL_BASE_URL) answers, as in CI's newcomer check. It
reports:

- the start: seconds from `make run` to the address line (printed once every process is
  ready) on a restart with the same data dir, and from Ctrl-C until every process is gone;
- each process's RSS and PSS (from /proc/<pid>/smaps_rollup), idle and after N concurrent
  streamed turns, and their sums; the broker (redis-server) is listed apart, not summed;
- the same after one call of each tool that starts something of its own: `shell` (a
  command in the sandbox container) and `browser_read` (a loopback page read in Chromium).
  Chromium and Playwright's driver are listed apart, as is the container (its memory from
  `docker stats`), not summed into Flarebot's figure;
- JSON in `bench/results/footprint.json`.

    .venv/bin/python bench/footprint.py --no-tools  # without the tool calls
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from scripts.newcomer import (  # noqa: E402
    ANSWER,
    Screen,
    create_owner,
    flarebot_processes,
    make_run_started,
    newcomer_env,
    sign_in,
    streamed_turn,
    turn_events,
    wait_for,
)
from tests.support.fake_providers import Call, FakeProviders, Text  # noqa: E402
from tests.support.resources import free_port  # noqa: E402

SETTLE_SECONDS = 10.0  # after the address line (every process ready), before idle is read
STOP_LIMIT = 60.0
PAGE = b"<!doctype html><title>Footprint</title><main><h1>A page for the footprint</h1><p>Read me.</p></main>"
KINDS = (
    ("broker", "redis-server"),
    ("chromium", "chrom"),
    ("playwright", "playwright"),
    ("beat", " beat"),
    ("worker", " worker"),
    ("web", "flarebot.web"),
    ("supervisor", "flarebot.supervisor"),
    ("supervisor", "runstack"),  # before issue 30 (and its start helper, `runstack --report`)
    ("make", "make "),
)


def kind_of(command: str) -> str:
    for kind, marker in KINDS:
        if marker in command:
            return kind
    return "other"


def memory_of(pid: int) -> tuple[int, int] | None:
    """(RSS, PSS) in KiB, or None for a process gone meanwhile."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    values = {}
    for line in text.splitlines()[1:]:
        name, _, rest = line.partition(":")
        if rest.strip().endswith("kB"):
            values[name] = int(rest.split()[0])
    return values.get("Rss", 0), values.get("Pss", 0)


def snapshot(root: int) -> dict[str, Any]:
    """Every process of the stack with its memory; sums over Flarebot's own (the broker apart)."""
    processes: list[dict[str, Any]] = []
    for pid, command in sorted(flarebot_processes(root).items()):
        memory = memory_of(pid)
        if memory is None:
            continue
        processes.append({"pid": pid, "kind": kind_of(command), "rss_kib": memory[0], "pss_kib": memory[1]})
    own = [p for p in processes if p["kind"] not in APART]
    return {
        "processes": processes,
        "containers": containers(),
        "rss_mib": round(sum(p["rss_kib"] for p in own) / 1024, 1),
        "pss_mib": round(sum(p["pss_kib"] for p in own) / 1024, 1),
    }


APART = ("broker", "make", "chromium", "playwright")


def containers() -> list[dict[str, Any]]:
    """The shell's sandbox containers now running, with their memory (`docker stats`)."""
    if shutil.which("docker") is None:
        return []
    stats = subprocess.run(
        ["docker", "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    found = []
    for line in stats.stdout.splitlines():
        name, _, usage = line.partition(" ")
        if name.startswith("flarebot-sh-"):
            found.append({"name": name, "memory": usage.split(" / ")[0]})
    return found


def page_served() -> tuple[http.server.ThreadingHTTPServer, int]:
    """A loopback page for browser_read (its port goes into FLAREBOT_NETWORK_ALLOW)."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def tool_turn(base: str, session: str, model: FakeProviders, call: Call) -> dict[str, Any]:
    """One turn in which the model calls one tool; return the tool's last activity card."""
    model.script([call], [Text("Done.")])
    card: dict[str, Any] = {}
    for frame in turn_events(base, session, "Use the tool.", timeout=180):
        if frame["event"] == "activity.updated":
            card = frame["data"]["activity"]
    return card


def streams(base: str, session: str, count: int) -> None:
    """`count` turns at once, each on its own socket; every one must stream the whole answer."""
    failures: list[BaseException] = []

    def one() -> None:
        try:
            deltas = streamed_turn(base, session)
            if "".join(deltas) != "".join(ANSWER):
                raise AssertionError(f"a stream was {deltas!r}")
        except BaseException as error:  # reported below, with the others
            failures.append(error)

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def print_snapshot(label: str, shot: dict) -> None:
    print(f"{label}: {shot['rss_mib']} MiB RSS, {shot['pss_mib']} MiB PSS (Flarebot's own: {', '.join(APART)} apart)")
    for process in shot["processes"]:
        rss, pss = process["rss_kib"] / 1024, process["pss_kib"] / 1024
        print(f"  {process['kind']:<11} pid {process['pid']:<8} RSS {rss:7.1f} MiB  PSS {pss:7.1f} MiB")
    apart = [p for p in shot["processes"] if p["kind"] in ("chromium", "playwright")]
    if apart:
        rss, pss = sum(p["rss_kib"] for p in apart) / 1024, sum(p["pss_kib"] for p in apart) / 1024
        print(f"  Chromium and Playwright's driver, apart: RSS {rss:.1f} MiB, PSS {pss:.1f} MiB")
    for container in shot["containers"]:
        print(f"  container   {container['name']}  {container['memory']}")
    if "containers" in shot and not shot["containers"]:
        print("  no sandbox container running (the shell starts one per command and removes it)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=20, help="concurrent streamed turns (0: none)")
    parser.add_argument("--no-tools", action="store_true", help="skip the shell and browser_read calls")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="flarebot-footprint-"))
    model = FakeProviders(port=free_port()).start()
    model.default_answer = [Text(chunk, delay=0.02) for chunk in ANSWER]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    page, page_port = page_served()
    env = newcomer_env(model.local_url, port) | {
        "FLAREBOT_DATA_DIR": str(data_dir),
        "FLAREBOT_NETWORK_ALLOW": f"127.0.0.1:{page_port}",
    }
    results: dict = {"streams": args.streams}
    try:
        # A first start makes the data dir (migrations) and the owner: the one measured is
        # a restart, as someone who runs Flarebot every day sees it.
        first, results["first_start_seconds"] = make_run(env, base)
        create_owner(BASE_DIR, env)
        results["first_stop_seconds"] = stop(first)
        run, results["address_seconds"] = make_run(env, base)
        print(f"start: the address line {results['address_seconds']} s after `make run` (a restart, same data dir)")
        time.sleep(SETTLE_SECONDS)
        results["idle"] = snapshot(run.pid)
        print_snapshot("idle", results["idle"])
        session = sign_in(base)
        if args.streams:
            streams(base, session, args.streams)
            results["after_streams"] = snapshot(run.pid)
            print_snapshot(f"after {args.streams} streams", results["after_streams"])
        if not args.no_tools:
            shell = tool_turn(base, session, model, Call("fp_shell", "shell", {"command": "echo footprint"}))
            read = Call("fp_read", "browser_read", {"url": f"http://127.0.0.1:{page_port}/"})
            browser = tool_turn(base, session, model, read)
            results["tool_cards"] = {"shell": shell.get("status"), "browser_read": browser.get("status")}
            print(f"tool calls: shell {shell.get('status')}, browser_read {browser.get('status')}")
            results["after_tools"] = snapshot(run.pid)
            print_snapshot("after one call of each tool", results["after_tools"])
        results["stop_seconds"] = stop(run)
        print(f"Ctrl-C: every process gone after {results['stop_seconds']} s")
    finally:
        page.shutdown()
        model.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    out = BASE_DIR / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "footprint.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


def make_run(env: dict[str, str], base: str) -> tuple[subprocess.Popen[str], float]:
    """Start `make run`; return it once it printed the address (once every process is ready), and when."""
    started = time.monotonic()
    run = make_run_started(BASE_DIR, env)
    screen = Screen(run, echo=False)
    wait_for(lambda: any(line.startswith(f"Open {base}/") for line in screen.lines), 300, "the address", run)
    return run, round(time.monotonic() - started, 2)


def stop(run: subprocess.Popen[str]) -> float:
    """Ctrl-C (SIGINT to the group); seconds until every process is gone (killed after STOP_LIMIT)."""
    before = set(flarebot_processes(run.pid))
    started = time.monotonic()
    os.killpg(run.pid, signal.SIGINT)
    while flarebot_processes(run.pid, before) and time.monotonic() - started < STOP_LIMIT:
        time.sleep(0.1)
    took = round(time.monotonic() - started, 2)
    for pid in flarebot_processes(run.pid, before):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return took


if __name__ == "__main__":
    sys.exit(main())
