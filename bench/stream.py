"""Streaming benchmark: the real stack, a loopback provider at a fixed token rate, N sockets.

    .venv/bin/python bench/stream.py                 # 1, 20 and 100 concurrent streams
    .venv/bin/python bench/stream.py --streams 20    # one scenario
    .venv/bin/python bench/stream.py --database sqlite
    .venv/bin/python bench/stream.py --facts 200      # with 200 memory facts stored

With `--facts N` the owner's memory holds N facts (added through the API before the
warm-up), each sharing the word of the bench's message, so every turn's memory selection
finds and sends 8 of them: its most expensive case.

For each scenario every client opens the conversation socket; once every socket was
accepted (and half a second more, for the server's replays), all send `user_message` at
the same moment, and each records its `text.delta`s. Scenarios are repeated (a new set of
conversations each round) until 100 turns were measured, so that a p95 is not one
unlucky turn of twenty; the single stream runs 20 turns one after another. The first
round is not treated specially: it includes whatever the stack pays for its first
burst. The provider emits 100 chunks, 20 ms
apart, each a unique token, and notes when it wrote each one. Printed and written to
bench/results/stream.json:
- first delta: time from submit to the first text.delta, p50/p95;
- delta latency: provider emit to socket receive, per token, p50/p99;
- stream ratio: (last - first delta received) / (last - first chunk emitted), p50/max;
- errors, and dropped or duplicated deltas (text and sequence checks per socket).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import BenchStack, start
from flarebot.core.env import DEFAULT_WORKER_PROCESSES
from tests.support.fake_providers import Step, Text

CHUNKS = 100
INTERVAL = 0.020
CONNECT_TIMEOUT_SECONDS = 60
REPLAY_SETTLE_SECONDS = 0.5


@dataclass
class Client:
    index: int
    conversation_id: str
    tokens: list[str]
    submitted: float = 0.0
    submitted_wall: float = 0.0
    first_delta_wall: float = 0.0
    deltas: list[tuple[float, str]] = field(default_factory=list)
    sequences: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    done: bool = False
    created: float = field(default_factory=time.monotonic)
    connected_after: float | None = None  # seconds from the round's start to this socket's accept


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


async def run_client(bench: BenchStack, client: Client, start_gate: asyncio.Event, timeout: float) -> None:
    url = bench.base_url.replace("http", "ws") + f"/ws/conversations/{client.conversation_id}/"
    async with websockets.connect(
        url, additional_headers={"Origin": bench.origin, "Cookie": bench.cookie}, max_size=2**22
    ) as socket:
        client.connected_after = time.monotonic() - client.created
        await start_gate.wait()
        client.submitted = time.monotonic()
        client.submitted_wall = time.time()
        await socket.send(json.dumps({"type": "user_message", "request_id": str(uuid.uuid4()), "text": "go"}))
        deadline = client.submitted + timeout
        while time.monotonic() < deadline:
            raw = await asyncio.wait_for(socket.recv(), timeout=max(0.1, deadline - time.monotonic()))
            now = time.monotonic()
            frame = json.loads(raw)
            if frame["type"] == "error":
                client.errors.append(frame["code"])
            if frame["type"] != "event":
                continue
            client.sequences.append(frame["sequence"])
            if frame["event"] == "text.delta":
                if not client.deltas:
                    client.first_delta_wall = time.time()
                client.deltas.append((now, frame["data"]["text"]))
            elif frame["event"] in ("turn.completed", "turn.failed", "turn.cancelled"):
                if frame["event"] != "turn.completed":
                    client.errors.append(frame["event"])
                client.done = True
                return
        client.errors.append("timeout")


async def one_round(
    bench: BenchStack, streams: int, round_number: int
) -> tuple[list[Client], list[object], dict[str, float]]:
    """Run `streams` conversations at once; return the clients, their outcomes, the emit times."""
    with bench.client() as http:
        ids = [http.post("/api/conversations/", json={"name": f"bench {i}"}).json()["id"] for i in range(streams)]
    tokens = [[f"r{round_number}s{i}t{j:03d} " for j in range(CHUNKS)] for i in range(streams)]
    clients = [Client(i, ids[i], tokens[i]) for i in range(streams)]
    # Answers are handed out in request order; tokens are unique, so any stream may get any.
    answers: list[list[Step]] = [[Text(token, delay=INTERVAL) for token in c.tokens] for c in clients]
    bench.providers.script(*answers)
    gate = asyncio.Event()
    tasks = [asyncio.create_task(run_client(bench, c, gate, timeout=120)) for c in clients]
    await sockets_connected(clients, tasks)
    # The measuring clients hold every delta of every round: their own collector's pauses
    # would be counted as Flarebot's latency. It runs between rounds instead.
    gc.collect()
    gc.disable()
    try:
        gate.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        gc.enable()
    return clients, list(results), bench.providers.emitted()


async def sockets_connected(clients: list[Client], tasks: list[asyncio.Task[None]]) -> None:
    """Wait until every socket was accepted, then for the server to finish their replays.

    The burst measures the submits, not the connects: a hundred sockets take the web most
    of a second to accept on this kind of machine, and a fixed pause before the submits let
    that spill into the burst whenever they took longer.
    """
    deadline = time.monotonic() + CONNECT_TIMEOUT_SECONDS
    while time.monotonic() < deadline and not all(c.connected_after is not None for c in clients):
        if any(task.done() for task in tasks):
            return  # a socket failed: its error is reported with the round
        await asyncio.sleep(0.02)
    await asyncio.sleep(REPLAY_SETTLE_SECONDS)  # each accepted socket then reads its (empty) replay


async def scenario(bench: BenchStack, streams: int, rounds: int) -> dict[str, object]:
    clients: list[Client] = []
    results: list[object] = []
    emitted: dict[str, float] = {}
    for round_number in range(rounds):
        round_clients, round_results, round_emitted = await one_round(bench, streams, round_number)
        clients += round_clients
        results += round_results
        emitted.update(round_emitted)
    first_delta, latencies, ratios = [], [], []
    errors, dropped, duplicated = 0, 0, 0
    for client, result in zip(clients, results, strict=True):
        if isinstance(result, BaseException):
            client.errors.append(type(result).__name__)
        errors += len(client.errors)
        if client.deltas:
            first_delta.append((client.deltas[0][0] - client.submitted) * 1000)
        received = "".join(text for _, text in client.deltas)
        tokens = received.split()
        expected = None
        for c in clients:
            if tokens and c.tokens[0].strip() == tokens[0]:
                expected = c.tokens
        if expected is None or received != "".join(expected):
            dropped += 1 if len(tokens) < CHUNKS else 0
            duplicated += 1 if len(tokens) > CHUNKS or len(set(tokens)) != len(tokens) else 0
            if len(tokens) == CHUNKS and expected is None:
                dropped += 1
        if client.sequences and client.sequences != list(
            range(client.sequences[0], client.sequences[0] + len(client.sequences))
        ):
            duplicated += 1
        for at, text in client.deltas:
            for token in text.split():
                if token + " " in emitted:
                    latencies.append((at - emitted[token + " "]) * 1000)
        if expected is not None and len(client.deltas) > 1:
            provider_span = emitted.get(expected[-1], 0) - emitted.get(expected[0], 0)
            client_span = client.deltas[-1][0] - client.deltas[0][0]
            if provider_span > 0:
                ratios.append(client_span / provider_span)
    stages = _stages(bench, clients)
    return {
        "streams": streams,
        "rounds": rounds,
        "first_delta_stages_ms_p50": stages,
        "first_delta_ms": {"p50": percentile(first_delta, 50), "p95": percentile(first_delta, 95)},
        "delta_latency_ms": {"p50": percentile(latencies, 50), "p99": percentile(latencies, 99)},
        "stream_ratio": {"p50": percentile(ratios, 50), "max": max(ratios) if ratios else float("nan")},
        "mean_ratio": statistics.fmean(ratios) if ratios else float("nan"),
        "errors": errors,
        "error_kinds": sorted({kind for client in clients for kind in client.errors}),
        "streams_with_dropped_deltas": dropped,
        "streams_with_duplicated_deltas": duplicated,
        "completed": sum(1 for c in clients if c.done),
        "sockets_accepted_within_s": max((c.connected_after or 0.0) for c in clients),
    }


def _stages(bench: BenchStack, clients: list[Client]) -> dict[str, float]:
    """Where the time to first delta goes, from the rows' timestamps (PostgreSQL runs only)."""
    if not bench.database:
        return {}
    import psycopg

    by_conversation = {c.conversation_id: c for c in clients}
    stages: dict[str, list[float]] = {"stored": [], "claimed": [], "delta_stored": [], "delivered": []}
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{bench.database}") as conn:
        rows = conn.execute(
            "SELECT t.conversation_id::text, extract(epoch from t.created_at), extract(epoch from t.started_at),"
            " (SELECT extract(epoch from min(e.created_at)) FROM conversations_event e"
            "  WHERE e.turn_id = t.id AND e.kind = 'text.delta')"
            " FROM conversations_turn t WHERE t.conversation_id::text = ANY(%s)",
            [list(by_conversation)],
        ).fetchall()
    for conversation_id, stored, claimed, delta in rows:
        client = by_conversation[conversation_id]
        if None in (stored, claimed, delta) or not client.first_delta_wall:
            continue
        stages["stored"].append((float(stored) - client.submitted_wall) * 1000)
        stages["claimed"].append((float(claimed) - float(stored)) * 1000)
        stages["delta_stored"].append((float(delta) - float(claimed)) * 1000)
        stages["delivered"].append((client.first_delta_wall - float(delta)) * 1000)
    return {name: round(percentile(values, 50), 1) for name, values in stages.items()}


def rounds_for(streams: int) -> int:
    """Rounds of a scenario: 100 turns in all, but 20 for the single stream (they run in turn)."""
    return 20 if streams == 1 else max(1, -(-100 // streams))


def facts_store(bench: BenchStack, count: int) -> None:
    """Fill the owner's memory with facts that the message "go" selects."""
    with bench.client() as http:
        for i in range(count):
            content = f"Fact {i}: the owner likes to go walking by lake number {i} on the weekend."
            http.post("/api/memories/", json={"content": content}).raise_for_status()


async def main_async(args: argparse.Namespace) -> list[dict[str, object]]:
    bench = start(database=args.database, worker_processes=args.workers)
    try:
        facts_store(bench, args.facts)
        await scenario(bench, 1, rounds=2)  # warm-up: SDK clients, connections, caches
        # Small scenarios are repeated so their percentiles rest on enough turns.
        return [await scenario(bench, n, rounds=rounds_for(n)) for n in args.streams]
    finally:
        bench.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, nargs="*", default=[1, 20, 100])
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--facts", type=int, default=0, help="memory facts stored before the run (at most 200)")
    parser.add_argument(
        "--workers",
        type=int,
        default=DEFAULT_WORKER_PROCESSES,
        help="worker processes (default: FLAREBOT_WORKER_PROCESSES's default, one)",
    )
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    print(f"{'streams':>7} {'first p50':>10} {'first p95':>10} {'lat p50':>8} {'lat p99':>8} "
          f"{'ratio p50':>9} {'ratio max':>9} {'errors':>6} {'dropped':>7} {'dup':>4} {'done':>5}")  # fmt: skip
    for r in results:
        fd, lat, ratio = r["first_delta_ms"], r["delta_latency_ms"], r["stream_ratio"]
        print(
            f"{r['streams']:>7} {fd['p50']:>9.1f}ms {fd['p95']:>9.1f}ms {lat['p50']:>7.1f}ms {lat['p99']:>7.1f}ms "  # type: ignore[index]
            f"{ratio['p50']:>9.3f} {ratio['max']:>9.3f} {r['errors']:>6} {r['streams_with_dropped_deltas']:>7} "  # type: ignore[index]
            f"{r['streams_with_duplicated_deltas']:>4} {r['completed']:>5}"
        )
    out = Path(__file__).resolve().parent / "results" / "stream.json"
    out.parent.mkdir(exist_ok=True)
    summary = {
        "database": args.database,
        "workers": args.workers,
        "facts": args.facts,
        "chunks": CHUNKS,
        "interval_s": INTERVAL,
    }
    out.write_text(json.dumps({**summary, "results": results}, indent=2))
    for r in results:
        print(
            f"{r['streams']:>7} streams, first delta by stage (p50 ms): {r['first_delta_stages_ms_p50']};"
            f" sockets accepted within {r['sockets_accepted_within_s']:.2f} s"
        )
        if r["error_kinds"]:
            print(f"{r['streams']:>7} streams, errors seen: {r['error_kinds']}")
    print(f"written {out}")


if __name__ == "__main__":
    main()
