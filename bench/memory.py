"""Memory benchmark: search latency at 200 and at 100,000 facts, on SQLite and PostgreSQL.

    .venv/bin/python bench/memory.py                        # both databases, 200 and 100,000 facts
    .venv/bin/python bench/memory.py --database sqlite --facts 200
    .venv/bin/python bench/memory.py --queries 2000

Each database runs in a process of its own with the real settings (`flarebot.settings`) on
a fresh database (a new PostgreSQL database, or a SQLite file in a temporary data dir),
migrated like production. Facts are inserted directly (the 200-fact limit lives in the
service and is lifted here), made of words drawn with a Zipf distribution from a fixed
vocabulary of content words, so that common words match many facts as they would in real
text (a typical query matches several thousand of 100,000 facts). PostgreSQL's table is
then vacuumed and analysed, as autovacuum would. Measured, as p50 / p99 / max in
milliseconds:
- recall: `memory.selectors.facts_recall` for typical queries (5-20 words of the same
  distribution) and for the worst query (the 24 most common words, matching most facts);
- selection: what each turn pays before its model call, `await db(memory_prompt_block)`
  from an event loop as the engine runs it (thread hop, connection, search, prompt text).
Targets: recall p99 under 5 ms at 200 facts and under 50 ms at 100,000. Printed and
written to bench/results/memory.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
VOCABULARY = 20_000
STOP_RANKS = 100
SEED = 20261130


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]

    return {"p50": round(at(50), 3), "p99": round(at(99), 3), "max": round(ordered[-1], 3)}


def vocabulary(rng: random.Random) -> list[str]:
    """Pronounceable made-up words, none of them an English stop word."""
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    words: set[str] = set()
    while len(words) < VOCABULARY:
        syllables = rng.randint(2, 4)
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables)))
    return sorted(words)


class Words:
    """Words drawn with a Zipf distribution over content words.

    Rank r has weight 1/(r + STOP_RANKS): in English text the most frequent ranks are
    stop words, which the search drops, so the content words start further down the curve.
    """

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words = vocabulary(rng)
        self.weights = [1 / (rank + STOP_RANKS) for rank in range(len(self.words))]

    def draw(self, count: int) -> list[str]:
        return self.rng.choices(self.words, weights=self.weights, k=count)

    def sentence(self, low: int, high: int) -> str:
        return " ".join(self.draw(self.rng.randint(low, high))).capitalize() + "."


def child(database: str, fact_counts: list[int], queries: int) -> dict[str, Any]:
    """Run in a fresh process: make the database, then measure each fact count in turn."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "flarebot.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from flarebot.core.database import db
    from memory.models import Fact
    from memory.selectors import facts_recall, memory_prompt_block

    call_command("migrate", verbosity=0)
    rng = random.Random(SEED)
    words = Words(rng)
    worst = " ".join(words.words[:24])
    results: dict[str, Any] = {}
    stored = 0
    for count in sorted(fact_counts):
        while stored < count:
            batch = min(5_000, count - stored)
            Fact.objects.bulk_create(Fact(content=words.sentence(8, 30)) for _ in range(batch))
            stored += batch
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE memory_fact" if connection.vendor == "postgresql" else "ANALYZE")
        typical = [words.sentence(5, 20) for _ in range(queries)]

        def timed(run: Any, texts: list[str]) -> list[float]:
            for text in texts[:50]:  # warm-up: caches, prepared statements
                run(text)
            spent = []
            for text in texts:
                started = time.perf_counter()
                run(text)
                spent.append((time.perf_counter() - started) * 1000)
            return spent

        recall_typical = timed(lambda text: facts_recall(query=text), typical)
        recall_worst = timed(lambda text: facts_recall(query=text), [worst] * max(50, queries // 10))
        matched = statistics.fmean(len(facts_recall(query=text)) for text in typical[:200])

        async def selections(texts: list[str]) -> list[float]:
            select = db(memory_prompt_block)
            for text in texts[:50]:
                await select(text=text)
            spent = []
            for text in texts:
                started = time.perf_counter()
                await select(text=text)
                spent.append((time.perf_counter() - started) * 1000)
            return spent

        selection = asyncio.run(selections(typical))
        results[str(count)] = {
            "recall_typical_ms": percentiles(recall_typical),
            "recall_worst_ms": percentiles(recall_worst),
            "selection_ms": percentiles(selection),
            "facts_returned_mean": round(matched, 2),
        }
    return results


def run_database(database: str, fact_counts: list[int], queries: int) -> dict[str, Any]:
    run_id = secrets.token_hex(4)
    data_dir = Path(tempfile.mkdtemp(prefix=f"flarebot-bench-memory-{run_id}-"))
    env = {**os.environ, "FLAREBOT_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
    for variable in ("DATABASE_URL", "FLAREBOT_ORIGIN", "FLAREBOT_MODE"):
        env.pop(variable, None)
    name: str | None = None
    if database == "postgres":
        import psycopg

        name = f"flarebot_bench_memory_{run_id}"
        with psycopg.connect(SERVER, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{name}"
    counts = ",".join(str(c) for c in fact_counts)
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--child", database, "--facts", counts, "--queries", str(queries)],
            env=env,
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        if name:
            import psycopg

            with psycopg.connect(SERVER, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        shutil.rmtree(data_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", choices=["postgres", "sqlite"], nargs="*", default=["sqlite", "postgres"])
    parser.add_argument("--facts", default="200,100000", help="comma-separated fact counts (default 200,100000)")
    parser.add_argument("--queries", type=int, default=1000, help="typical queries measured per scenario")
    parser.add_argument("--child", choices=["postgres", "sqlite"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    counts = [int(c) for c in args.facts.split(",")]
    if args.child:
        print(json.dumps(child(args.child, counts, args.queries)))
        return
    results = {database: run_database(database, counts, args.queries) for database in args.database}
    print(f"load average: {os.getloadavg()[0]:.2f} (2 cores shared)")
    print(f"{'database':>9} {'facts':>7} {'recall p50':>10} {'recall p99':>10} {'worst p99':>10} "
          f"{'select p50':>10} {'select p99':>10} {'found':>6}")  # fmt: skip
    for database, by_count in results.items():
        for count, r in by_count.items():
            print(
                f"{database:>9} {int(count):>7,} {r['recall_typical_ms']['p50']:>8.2f}ms "
                f"{r['recall_typical_ms']['p99']:>8.2f}ms {r['recall_worst_ms']['p99']:>8.2f}ms "
                f"{r['selection_ms']['p50']:>8.2f}ms {r['selection_ms']['p99']:>8.2f}ms {r['facts_returned_mean']:>6}"
            )
    out = ROOT / "bench" / "results" / "memory.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"queries": args.queries, "results": results}, indent=2))
    print(f"written {out}")


if __name__ == "__main__":
    main()
