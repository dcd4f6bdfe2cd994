"""Recovery benchmark: how soon a turn continues after its worker is killed with SIGKILL.

    .venv/bin/python bench/recovery.py            # 3 rounds on PostgreSQL
    .venv/bin/python bench/recovery.py --rounds 5 --database sqlite

Each round starts a slow answer on the private stack (bench/harness.py), waits for its
first text, kills the worker process with SIGKILL, starts a fresh worker at once, and
measures the time from the kill to the turn's next attempt (`turn.started`, attempt 2)
and to its end. Nobody nudges the turn: the lease runs out and beat's reconciliation
finds it. Target (issue 11): the turn continues within 40 s of the kill. Printed and
written to bench/results/recovery.json.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import harness  # noqa: E402
from tests.support.fake_providers import Step, Text  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "recovery.json"


def _events(client, conversation_id: str) -> list[dict]:
    """Every stored event of the conversation, page by page."""
    events: list[dict] = []
    while True:
        response = client.get(f"/api/conversations/{conversation_id}/events/", params={"after": len(events)})
        page = response.json()
        if "events" not in page:
            raise RuntimeError(f"events: {response.status_code} {page}")
        events += page["events"]
        if len(page["events"]) < 500:
            return events


def _round(bench: harness.BenchStack) -> dict[str, float]:
    saga: list[Step] = [Text(f"Line {i:03d}. ", delay=0.1) for i in range(600)]  # a minute if never cut off
    bench.providers.script(saga, [Text("And so it ends.")])
    with bench.client() as client:
        conversation = client.post("/api/conversations/", json={"name": "Recovery"}).json()["id"]
        body = {"request_id": str(uuid.uuid4()), "text": "Tell me the saga."}
        client.post(f"/api/conversations/{conversation}/messages/", json=body).raise_for_status()
        deadline = time.monotonic() + 60
        while not any(e["event"] == "text.delta" for e in _events(client, conversation)):
            if time.monotonic() > deadline:
                raise RuntimeError("the answer never started")
            time.sleep(0.1)
        since = bench.stack.log_text("worker")
        bench.stack.signal("worker", signal.SIGKILL)
        killed = time.monotonic()
        bench.stack.processes["worker"].wait(10)
        bench.stack.start(only="worker")
        bench.stack.wait_for(
            lambda: " ready." in bench.stack.log_text("worker")[len(since) :], timeout=60, what="a fresh worker"
        )
        worker_ready = time.monotonic() - killed
        continued = ended = None
        while ended is None:
            if time.monotonic() - killed > 180:
                raise RuntimeError("the turn never continued")
            kinds = [(e["event"], e["data"]) for e in _events(client, conversation)]
            if continued is None and ("turn.started", {"attempt": 2}) in kinds:
                continued = time.monotonic() - killed
            if any(kind in ("turn.completed", "turn.failed") for kind, _ in kinds):
                ended = time.monotonic() - killed
            time.sleep(0.1)
    assert continued is not None
    return {"worker_ready_s": worker_ready, "continued_s": continued, "ended_s": ended}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database", choices=("postgres", "sqlite"), default="postgres")
    args = parser.parse_args()
    bench = harness.start(database=args.database, worker_threads=16, worker_processes=1)
    try:
        rounds = [_round(bench) for _ in range(args.rounds)]
    except Exception:
        print(bench.stack.log_text("web")[-6000:], file=sys.stderr)
        raise
    finally:
        bench.stop()
    continued = [r["continued_s"] for r in rounds]
    summary = {
        "database": args.database,
        "rounds": rounds,
        "continued_s": {"min": min(continued), "median": statistics.median(continued), "max": max(continued)},
        "target_s": 40,
    }
    for i, r in enumerate(rounds, 1):
        print(
            f"round {i}: fresh worker ready {r['worker_ready_s']:.1f} s, turn continued {r['continued_s']:.1f} s,"
            f" ended {r['ended_s']:.1f} s after the kill"
        )
    median = statistics.median(continued)
    print(f"continued after the kill: median {median:.1f} s, max {max(continued):.1f} s (target 40 s)")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
