"""Notification benchmark: from a task run's completion event to a loopback receiver, on the real stack.

    .venv/bin/python bench/notify.py                    # PostgreSQL
    .venv/bin/python bench/notify.py --database sqlite

It starts a private stack (bench/harness.py: fresh database, own Redis database, daphne,
worker and beat), adds one JSON-webhook destination (a loopback receiver in this process),
switches the `run_completed` kind on, and makes 100 tasks due in the same minute
(bench/tasks.py's `make_tasks`). For each run it reads when its completion event was
stored and when the message that carried it reached the receiver, and prints p50/p99 of
that lag, the lag of the first message (a kind's first in its minute goes at once), and
how many messages arrived (the coalescing minute: the first, then one saying how many).
Beside the burst it runs 20 chat streams (bench/tasks.py's rounds: 400 chunks, 20 ms
apart, submitted 2 s before the runs fall due). The burst comes four times, notifications
off (no destination), on, on, off, so that what notifications cost the streams shows apart
from what 100 task turns cost them: the streams' figures must not move between off and on.
20 streams alone come first, for scale. Results are written to bench/results/notify.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import BenchStack, start
from bench.stream import percentile
from bench.tasks import (
    TASKS,
    _epoch,
    due_minute,
    lags,
    make_tasks,
    reschedule,
    sql_rows,
    streams_round,
    summarize_streams,
    wait_beat,
)
from tests.support.resources import free_port


class Receiver:
    """A JSON webhook on 127.0.0.1 that records each message with its arrival time."""

    def __init__(self) -> None:
        self.port = free_port()
        self.arrivals: list[tuple[float, dict[str, Any]]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.arrivals.append((time.time(), json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def notifications_on(bench: BenchStack, receiver: Receiver) -> str:
    """Add the receiver as the one destination, with every kind on; return its id."""
    with bench.client() as http:
        added = http.post(
            "/api/notifications/destinations/", json={"url": f"json://127.0.0.1:{receiver.port}/", "label": "Bench"}
        )
        assert added.status_code == 201, added.text
        kinds = {"needs_answer": True, "proposal": True, "run_failed": True, "browser_finished": True}
        body = {
            "kinds": {**kinds, "run_completed": True},
            "quiet_hours": {"enabled": False, "start": None, "end": None, "time_zone": "UTC"},
        }
        saved = http.put("/api/notifications/settings/", json=body)
        assert saved.status_code == 200, saved.text
        return str(added.json()["id"])


def notifications_off(bench: BenchStack, destination_id: str) -> None:
    """No destination at all: what a stack without notifications does per event."""
    with bench.client() as http:
        deleted = http.delete(f"/api/notifications/destinations/{destination_id}/")
        assert deleted.status_code == 204, deleted.text


def measure(bench: BenchStack, receiver: Receiver, since: float, timeout: float = 240) -> dict[str, Any]:
    """Wait until every run's delivery of this round was sent; return the lags from its event to the receiver."""
    deadline = time.time() + timeout
    query = (
        "SELECT n.created_at, d.sent_at FROM notifications_delivery d"
        " JOIN notifications_notification n ON n.id = d.notification_id WHERE d.status = ?"
    )
    sent: list[tuple[Any, ...]] = []
    while time.time() < deadline:
        sent = [row for row in sql_rows(bench, query, ["sent"]) if _epoch(row[0]) >= since]
        if len(sent) >= TASKS:
            break
        time.sleep(1)
    time.sleep(1)  # the last message's arrival
    # A delivery is carried by the first message that arrived at or after its send began.
    arrived_here = sorted((at, payload) for at, payload in receiver.arrivals if at >= since)
    arrivals = [at for at, _ in arrived_here]
    lags = []
    for created, sent_at in sent:
        began = _epoch(sent_at)
        arrived = next((at for at in arrivals if at >= began - 0.001), None)
        if arrived is not None:
            lags.append(arrived - _epoch(created))
    lags.sort()
    return {
        "runs": TASKS,
        "delivered": len(lags),
        "messages": len(arrived_here),
        "titles": [payload["title"] for _, payload in arrived_here],
        "event_to_receiver_p50_s": percentile(lags, 50) if lags else None,
        "event_to_receiver_p99_s": percentile(lags, 99) if lags else None,
        "first_message_s": min(lags) if lags else None,
    }


# Notifications off and on in the order off, on, on, off: a drift over the run (the database
# growing, the machine warming) weighs on both alike.
ORDER = (False, True, True, False)


async def main_async(bench: BenchStack, receiver: Receiver) -> dict[str, Any]:
    """20 streams alone; then rounds of 20 streams submitted just before 100 runs fall due, notifications off or on."""
    wait_beat(bench)
    await streams_round(bench, None, 0)  # warm-up
    alone = [await streams_round(bench, None, 1)]
    ids: list[str] = []
    beside: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    deliveries: list[dict[str, Any]] = []
    for n, on in enumerate(ORDER):
        destination = notifications_on(bench, receiver) if on else None
        due = due_minute()
        if ids:
            reschedule(bench, ids, due)
        else:
            ids = make_tasks(bench, due)
        since = time.time()
        state = "on" if on else "off"
        print(f"{TASKS} runs due at {due:%H:%M:%S}Z beside 20 streams, notifications {state}", flush=True)
        beside[on].append(await streams_round(bench, due.timestamp(), 100 + n))
        await asyncio.to_thread(lags, bench, due)  # every run started
        if destination is not None:
            deliveries.append(await asyncio.to_thread(measure, bench, receiver, since))
            print(f"  delivered: {json.dumps({k: v for k, v in deliveries[-1].items() if k != 'titles'})}", flush=True)
            notifications_off(bench, destination)
    return {
        "rounds": deliveries,
        "streams_without_tasks": summarize_streams(alone),
        "streams_beside_tasks_notifications_off": summarize_streams(beside[False]),
        "streams_beside_tasks_notifications_on": summarize_streams(beside[True]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    args = parser.parse_args()
    receiver = Receiver()
    bench = start(database=args.database)
    try:
        figures = asyncio.run(main_async(bench, receiver))
    finally:
        bench.stop()
        receiver.stop()
    figures = {"database": args.database, "measured_at": datetime.now(UTC).isoformat(), **figures}
    print(json.dumps({k: v for k, v in figures.items() if k != "rounds"}, indent=2))
    for n, delivered in enumerate(figures["rounds"]):
        p50, p99 = delivered["event_to_receiver_p50_s"], delivered["event_to_receiver_p99_s"]
        print(
            f"round {n + 1}: {delivered['delivered']} of {delivered['runs']} delivered"
            f" in {delivered['messages']} messages, event to receiver p50 {p50:.2f} s p99 {p99:.2f} s"
        )
    out = Path(__file__).resolve().parent / "results" / "notify.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
