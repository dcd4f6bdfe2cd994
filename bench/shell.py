"""Benchmark of the shell tool: `echo hi` through the tool, next to a plain `docker run --rm`.

Runs the tool in this process, as a worker's engine loop would, through the tool runtime
(input check, availability, a place under the limit of 4, the lease, a fresh container,
its removal), with a fresh SQLite database for the leases and places. Each round runs the
tool once and `docker run --rm --network none IMAGE bash -c 'echo hi'` once, in turn, so
both see the same machine. Prints p50/p95 of both and their ratio, and writes
`bench/results/shell.json`. Target: the tool's p50 within 1.3x of plain `docker run`.

    .venv/bin/python bench/shell.py [--runs 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_RATIO = 1.3
WARM_UP = 3


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def plain_docker_run(image: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", image, "bash", "-c", "echo hi"],
        capture_output=True,
        text=True,
        check=False,
    )
    took = (time.perf_counter() - started) * 1000
    if done.returncode != 0 or done.stdout != "hi\n":
        raise SystemExit(f"docker run failed: {done.stderr.strip()[:300]}")
    return took


async def through_the_tool() -> float:
    from tests.support.tool_context import tool_context
    from tools.runtime import Availability, CallWatch, tool_call_execute
    from tools.shell.tool import SHELL

    async def running() -> None:
        return None

    started = time.perf_counter()
    result = await tool_call_execute(
        SHELL,
        tool_context(),
        {"command": "echo hi"},
        availability=Availability(),
        watch=CallWatch(),
        on_running=running,
    )
    took = (time.perf_counter() - started) * 1000
    if result.output.get("stdout") != "hi\n" or result.output.get("cleanup") != "done":
        raise SystemExit(f"the shell tool failed: {result.output}")
    return took


def figures(times: list[float]) -> dict[str, float]:
    return {"p50_ms": round(percentile(times, 0.5), 1), "p95_ms": round(percentile(times, 0.95), 1)}


async def measure(runs: int) -> dict[str, object]:
    from tools.shell.engine import SANDBOX_IMAGE, engine_problem

    problem = engine_problem(fresh=True)
    if problem is not None:
        raise SystemExit(problem)
    loop = asyncio.get_running_loop()
    tool: list[float] = []
    plain: list[float] = []
    for round_number in range(WARM_UP + runs):
        tool_ms = await through_the_tool()
        plain_ms = await loop.run_in_executor(None, plain_docker_run, SANDBOX_IMAGE)
        if round_number >= WARM_UP:
            tool.append(tool_ms)
            plain.append(plain_ms)
    ratio = round(percentile(tool, 0.5) / percentile(plain, 0.5), 2)
    return {
        "runs": runs,
        "image": SANDBOX_IMAGE,
        "shell_tool": figures(tool),
        "docker_run": figures(plain),
        "p50_ratio": ratio,
        "target_ratio": TARGET_RATIO,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "flarebot.settings",
            "FLAREBOT_DATA_DIR": tempfile.mkdtemp(prefix="flarebot-bench-shell-"),
        }
    )
    os.environ.pop("DATABASE_URL", None)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    results = asyncio.run(measure(args.runs))
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores, {args.runs} runs each")
    for name in ("shell_tool", "docker_run"):
        numbers = results[name]
        assert isinstance(numbers, dict)
        print(f"{name:>11}: p50 {numbers['p50_ms']:7.1f} ms  p95 {numbers['p95_ms']:7.1f} ms")
    ratio = results["p50_ratio"]
    assert isinstance(ratio, float)
    verdict = "ok" if ratio <= TARGET_RATIO else "over target"
    print(f"p50 ratio {ratio:.2f} (target at most {TARGET_RATIO}: {verdict})")
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "shell.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
