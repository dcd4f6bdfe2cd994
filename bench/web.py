"""Benchmark of the page readers: read_url and browser_read on a local page, browser warm.

Runs the tools in this process, as a worker's engine loop would, against the loopback
fixture web server (reached through FLAREBOT_NETWORK_ALLOW, like any private host an
operator allows), with a fresh SQLite database for the browser leases. The browser is
started and one read is made before measuring. Prints p50/p95 of each tool and writes
`bench/results/web.json`. Targets: read_url under 50 ms, browser_read under 1.5 s.

    .venv/bin/python bench/web.py [--runs 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.resources import free_port  # noqa: E402

TARGETS_MS = {"read_url": 50.0, "browser_read": 1500.0}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def measure(runs: int, port: int) -> dict[str, dict[str, float]]:
    from tests.support.tool_context import tool_context
    from tools.web.browser import browser_pool
    from tools.web.browser_read import browser_read
    from tools.web.read_url import read_url

    url = f"http://127.0.0.1:{port}/bench"
    results: dict[str, dict[str, float]] = {}
    for name, tool in (("read_url", read_url), ("browser_read", browser_read)):
        warm = await tool(tool_context(), {"url": url})
        if not warm.get("ok"):
            raise SystemExit(f"{name} failed on the bench page: {warm}")
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            result = await tool(tool_context(), {"url": url})
            times.append((time.perf_counter() - started) * 1000)
            assert result.get("ok"), result
        results[name] = {
            "runs": runs,
            "p50_ms": round(percentile(times, 0.5), 1),
            "p95_ms": round(percentile(times, 0.95), 1),
            "target_ms": TARGETS_MS[name],
        }
    await browser_pool().shutdown()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    port = free_port()
    data_dir = tempfile.mkdtemp(prefix="flarebot-bench-web-")
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "flarebot.settings",
            "FLAREBOT_DATA_DIR": data_dir,
            "FLAREBOT_NETWORK_ALLOW": f"127.0.0.1:{port}",
            "FLAREBOT_TEST_WEB_PORT": str(port),
            "FLAREBOT_TEST_WEB_OTHER_PORT": str(free_port()),
        }
    )
    os.environ.pop("DATABASE_URL", None)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from tests.support.web_fixtures import fixture_web_start

    server = fixture_web_start()
    try:
        results = asyncio.run(measure(args.runs, port))
    finally:
        server.stop()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for name, figures in results.items():
        verdict = "ok" if figures["p95_ms"] < figures["target_ms"] else "over target"
        print(
            f"{name:>13}: p50 {figures['p50_ms']:7.1f} ms  p95 {figures['p95_ms']:7.1f} ms"
            f"  (target {figures['target_ms']:.0f} ms: {verdict})"
        )
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "web.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
