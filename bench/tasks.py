"""Scheduled-task benchmark: 100 tasks due in the same minute, on the real stack, alone and beside 20 chat streams.

    .venv/bin/python bench/tasks.py                    # PostgreSQL
    .venv/bin/python bench/tasks.py --database sqlite

It starts a private stack (bench/harness.py: fresh database, own Redis database, daphne,
worker(s) and beat), makes 100 conversations with one task each, a daily cron in
Europe/Berlin whose wall-clock time is the same minute for all, and waits for the runs.
For each run it reads from the rows when its occurrence was due, when beat's fire made the
run row, and when its turn was stored and started (claimed by a worker), and prints p50/p99
of each lag from the due instant. The task turns get a one-chunk answer.

Then it compares 20 chat streams (400 chunks, 20 ms apart: about 8 s each, over the
whole burst) without tasks and while 100 tasks come due: per-delta latency (provider
emit to socket receive) p50/p99, stream time over the provider's, first delta, and
errors. The streams start 2 s before the due minute, so their requests take the
scripted answers and the task turns the short default one. Results are written to
bench/results/tasks.json. Target: run start p99 under 5 s; streams no slower with tasks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import BenchStack, start
from bench.stream import Client, percentile, run_client
from flarebot.core.env import DEFAULT_WORKER_PROCESSES
from tests.support.fake_providers import Step, Text

TASKS = 100
STREAMS = 20
CHUNKS = 400
INTERVAL = 0.020
ZONE = ZoneInfo("Europe/Berlin")
START_AHEAD = 2.0  # seconds before the due minute that the streams are submitted
LEAD = timedelta(seconds=40)  # the due minute is at least this far ahead when the tasks are armed
VERSIONS: dict[str, int] = {}  # task id -> its version, as the API last returned it


def due_minute() -> datetime:
    at = datetime.now(UTC) + LEAD
    return at.replace(second=0, microsecond=0) + timedelta(minutes=1)


def expression_for(due: datetime) -> str:
    local = due.astimezone(ZONE)
    return f"{local.minute} {local.hour} * * *"


def sql_rows(bench: BenchStack, query: str, params: list[Any]) -> list[tuple[Any, ...]]:
    if bench.database:
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{bench.database}") as conn:
            return conn.execute(query.replace("?", "%s"), params).fetchall()
    import sqlite3

    with sqlite3.connect(str(bench.data_dir / "flarebot.sqlite3")) as conn:
        return conn.execute(query, params).fetchall()


def _epoch(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC).timestamp()


def make_tasks(bench: BenchStack, due: datetime) -> list[str]:
    schedule = {"kind": "cron", "expression": expression_for(due), "timezone": "Europe/Berlin"}
    ids = []
    with bench.client() as http:
        for n in range(TASKS):
            conversation = http.post("/api/conversations/", json={"name": f"tasks {n}"}).json()["id"]
            body = {
                "id": str(uuid.uuid4()),
                "conversation_id": conversation,
                "name": f"Task {n}",
                "instructions": "Say done.",
                "schedule": schedule,
                "enabled": True,
            }
            response = http.post("/api/tasks/", json=body)
            if response.status_code != 201:
                log = bench.stack.log_text("web")
                raise RuntimeError(f"creating task {n}: {response.status_code}\n{log[log.rfind('Traceback') :][:6000]}")
            assert response.json()["next_run_at"] == due.strftime("%Y-%m-%dT%H:%M:%SZ"), response.json()
            ids.append(body["id"])
    return ids


def reschedule(bench: BenchStack, ids: list[str], due: datetime) -> None:
    """Move every task to the new due minute (PUT with the version the last PUT returned)."""
    schedule = {"kind": "cron", "expression": expression_for(due), "timezone": "Europe/Berlin"}
    with bench.client() as http:
        for task_id in ids:
            body = {
                "expected_version": VERSIONS.get(task_id, 1),
                "name": "Task",
                "instructions": "Say done.",
                "schedule": schedule,
                "enabled": True,
            }
            response = http.put(f"/api/tasks/{task_id}/", json=body)
            if response.status_code != 200:
                log = bench.stack.log_text("web")
                raise RuntimeError(f"rescheduling: {response.status_code} {response.text[:300]}\n{log[-4000:]}")
            VERSIONS[task_id] = response.json()["version"]


def lags(bench: BenchStack, due: datetime, timeout: float = 180) -> dict[str, Any]:
    """Wait for every task's run of `due` to start its turn; return the lags from `due`, in ms."""
    query = (
        "SELECT r.created_at, t.created_at, t.started_at FROM tasks_taskrun r"
        " LEFT JOIN conversations_turn t ON t.id = r.turn_id WHERE r.intended_at = ?"
    )
    param = due if bench.database else due.strftime("%Y-%m-%d %H:%M:%S")
    deadline = time.monotonic() + timeout
    rows: list[tuple[Any, ...]] = []
    while time.monotonic() < deadline:
        rows = sql_rows(bench, query, [param])
        if len(rows) >= TASKS and all(row[2] is not None for row in rows):
            break
        time.sleep(0.5)
    base = due.timestamp()
    fired = [(_epoch(r[0]) - base) * 1000 for r in rows]
    stored = [(_epoch(r[1]) - base) * 1000 for r in rows if r[1] is not None]
    started = [(_epoch(r[2]) - base) * 1000 for r in rows if r[2] is not None]
    return {
        "runs": len(rows),
        "started": len(started),
        "run_recorded_ms": {"p50": percentile(fired, 50), "p99": percentile(fired, 99)},
        "turn_stored_ms": {"p50": percentile(stored, 50), "p99": percentile(stored, 99)},
        "turn_started_ms": {"p50": percentile(started, 50), "p99": percentile(started, 99), "max": max(started or [0])},
    }


async def streams_round(bench: BenchStack, at: float | None, round_number: int) -> dict[str, Any]:
    """Run 20 streams; with `at` (epoch seconds), submit them all START_AHEAD seconds before it."""
    with bench.client() as http:
        ids = [http.post("/api/conversations/", json={"name": f"stream {i}"}).json()["id"] for i in range(STREAMS)]
    tokens = [[f"q{round_number}s{i}t{j:03d} " for j in range(CHUNKS)] for i in range(STREAMS)]
    clients = [Client(i, ids[i], tokens[i]) for i in range(STREAMS)]
    gate = asyncio.Event()
    running = [asyncio.create_task(run_client(bench, c, gate, timeout=120)) for c in clients]
    await asyncio.sleep(1.0)  # every socket connected
    if at is not None:
        await asyncio.sleep(max(0.0, at - START_AHEAD - time.time()))
    answers: list[list[Step]] = [[Text(token, delay=INTERVAL) for token in c.tokens] for c in clients]
    bench.providers.script(*answers)
    gate.set()
    results = await asyncio.gather(*running, return_exceptions=True)
    emitted = bench.providers.emitted()
    first, latencies, ratios, errors, incomplete = [], [], [], 0, 0
    for client, result in zip(clients, results, strict=True):
        if isinstance(result, BaseException):
            client.errors.append(type(result).__name__)
        errors += len(client.errors)
        received = "".join(text for _, text in client.deltas).split()
        owner = next((c for c in clients if received and c.tokens[0].strip() == received[0]), None)
        if owner is None or received != [t.strip() for t in owner.tokens]:
            incomplete += 1
            continue
        first.append((client.deltas[0][0] - client.submitted) * 1000)
        for at_received, text in client.deltas:
            for token in text.split():
                if token + " " in emitted:
                    latencies.append((at_received - emitted[token + " "]) * 1000)
        span = emitted[owner.tokens[-1]] - emitted[owner.tokens[0]]
        if span > 0:
            ratios.append((client.deltas[-1][0] - client.deltas[0][0]) / span)
    return {
        "first": first,
        "latencies": latencies,
        "ratios": ratios,
        "errors": errors,
        "incomplete": incomplete,
    }


def summarize_streams(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    first = [v for r in rounds for v in r["first"]]
    latencies = [v for r in rounds for v in r["latencies"]]
    ratios = [v for r in rounds for v in r["ratios"]]
    return {
        "streams": sum(len(r["first"]) for r in rounds),
        "first_delta_ms": {"p50": percentile(first, 50), "p95": percentile(first, 95)},
        "delta_latency_ms": {"p50": percentile(latencies, 50), "p99": percentile(latencies, 99)},
        "stream_ratio": {"p50": percentile(ratios, 50), "max": max(ratios) if ratios else float("nan")},
        "errors": sum(r["errors"] for r in rounds),
        "incomplete": sum(r["incomplete"] for r in rounds),
    }


def wait_beat(bench: BenchStack) -> None:
    bench.stack.wait_for(lambda: "beat: Starting" in bench.stack.log_text("beat"), timeout=60, what="beat")


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    bench = start(database=args.database, worker_processes=args.workers)
    try:
        wait_beat(bench)
        await streams_round(bench, None, 0)  # warm-up
        alone = [await streams_round(bench, None, n) for n in range(1, args.rounds + 1)]
        due = due_minute()
        ids = make_tasks(bench, due)
        print(f"{TASKS} tasks due at {due:%H:%M:%S}Z ({expression_for(due)} in Europe/Berlin)", flush=True)
        tasks_alone = lags(bench, due)
        print(f"  alone: {json.dumps(tasks_alone)}", flush=True)
        beside: list[dict[str, Any]] = []
        tasks_beside = []
        for n in range(args.rounds):
            due = due_minute()
            reschedule(bench, ids, due)
            print(f"{TASKS} tasks due at {due:%H:%M:%S}Z beside {STREAMS} streams", flush=True)
            beside.append(await streams_round(bench, due.timestamp(), 100 + n))
            tasks_beside.append(lags(bench, due))
            print(f"  beside streams: {json.dumps(tasks_beside[-1])}", flush=True)
        return {
            "database": args.database,
            "workers": args.workers,
            "tasks": TASKS,
            "tasks_alone": tasks_alone,
            "tasks_beside_streams": tasks_beside,
            "streams_without_tasks": summarize_streams(alone),
            "streams_with_tasks": summarize_streams(beside),
        }
    finally:
        bench.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of 20 streams with and without tasks")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKER_PROCESSES)
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    alone = result["tasks_alone"]["turn_started_ms"]
    print(f"due -> turn started, 100 tasks alone: p50 {alone['p50']:.0f} ms, p99 {alone['p99']:.0f} ms")
    for n, beside in enumerate(result["tasks_beside_streams"]):
        started = beside["turn_started_ms"]
        label = f"beside {STREAMS} streams (round {n + 1})"
        print(f"due -> turn started, {label}: p50 {started['p50']:.0f} ms, p99 {started['p99']:.0f} ms")
    for name in ("streams_without_tasks", "streams_with_tasks"):
        s = result[name]
        print(
            f"{name}: first delta p50 {s['first_delta_ms']['p50']:.0f} ms p95 {s['first_delta_ms']['p95']:.0f} ms, "
            f"delta latency p50 {s['delta_latency_ms']['p50']:.1f} ms p99 {s['delta_latency_ms']['p99']:.1f} ms, "
            f"ratio p50 {s['stream_ratio']['p50']:.3f} max {s['stream_ratio']['max']:.3f}, "
            f"errors {s['errors']}, incomplete {s['incomplete']} of {s['streams'] + s['incomplete']}"
        )
    out = Path(__file__).resolve().parent / "results" / "tasks.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"written {out}")


if __name__ == "__main__":
    main()
