"""Attachments benchmark: uploading a 20 MB file, and a turn's first delta with a 20-page PDF.

    .venv/bin/python bench/attachments.py                 # PostgreSQL
    .venv/bin/python bench/attachments.py --database sqlite

Through the real stack (`bench.harness`: daphne, Celery, the loopback Anthropic provider):
- upload: `UPLOADS` uploads of a 20 MB (the per-file limit) text file over HTTP, each with
  different content (so each is hashed, sniffed and stored as a new blob); time per upload
  p50/max and throughput (MB/s at the p50);
- first delta: `TURNS` turns over the socket with a 20-page PDF attached (uploaded before,
  not timed) against `TURNS` turns without; time from `user_message` to the first
  `text.delta`, p50/p95 each, and the difference of the p50s (what handing the PDF over
  costs: extraction or a document block, and the larger request).
Printed and written to bench/results/attachments.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from attachments.limits import FILE_MAX
from bench.harness import BenchStack, start
from bench.stream import percentile
from tests.attachments.support import pdf
from tests.support.fake_providers import Text

UPLOADS = 5
TURNS = 10
PAGES = 20
RESULTS = Path(__file__).resolve().parent / "results" / "attachments.json"


def text_file(number: int) -> bytes:
    """A 20 MB text file whose content differs by `number`."""
    line = f"upload {number:04d} " + "x" * 100 + "\n"
    body = (line * (FILE_MAX // len(line) + 1)).encode()[: FILE_MAX - 1]
    return body + b"\n"


def bench_uploads(bench: BenchStack) -> dict[str, float]:
    seconds = []
    with bench.client() as http:
        http.timeout = 120
        conversation = http.post("/api/conversations/", json={"name": "uploads"}).json()["id"]
        for number in range(UPLOADS):
            content = text_file(number)
            begun = time.monotonic()
            response = http.post(
                f"/api/conversations/{conversation}/attachments/",
                files={"file": (f"big-{number}.txt", content, "text/plain")},
            )
            seconds.append(time.monotonic() - begun)
            response.raise_for_status()
            assert response.json()["size"] == FILE_MAX
    p50 = statistics.median(seconds)
    return {
        "bytes": FILE_MAX,
        "uploads": UPLOADS,
        "seconds_p50": round(p50, 3),
        "seconds_max": round(max(seconds), 3),
        "mb_per_second_p50": round(FILE_MAX / (1024 * 1024) / p50, 1),
    }


async def first_delta(bench: BenchStack, conversation: str, attachments: list[str]) -> float:
    url = bench.base_url.replace("http", "ws") + f"/ws/conversations/{conversation}/"
    async with websockets.connect(url, additional_headers={"Origin": bench.origin, "Cookie": bench.cookie}) as socket:
        await asyncio.sleep(0.3)  # the replay of a new conversation is over
        message: dict[str, object] = {
            "type": "user_message",
            "request_id": str(uuid.uuid4()),
            "text": "Summarise this.",
        }
        if attachments:
            message["attachments"] = attachments
        begun = time.monotonic()
        await socket.send(json.dumps(message))
        first: float | None = None
        while True:
            frame = json.loads(await asyncio.wait_for(socket.recv(), timeout=120))
            if frame["type"] == "error":
                raise RuntimeError(f"the turn was refused: {frame}")
            if frame["type"] != "event":
                continue
            if frame["event"] == "text.delta" and first is None:
                first = time.monotonic() - begun
            if frame["event"] in ("turn.completed", "turn.failed", "turn.cancelled"):
                if frame["event"] != "turn.completed" or first is None:
                    raise RuntimeError(f"the turn ended with {frame['event']}")
                return first


async def bench_turns(bench: BenchStack) -> dict[str, object]:
    document = pdf([f"Page {n}: " + "quarterly figures and notes " * 8 for n in range(1, PAGES + 1)])
    measured: dict[str, list[float]] = {"with_pdf": [], "without": []}
    for round_number in range(TURNS):
        for case in ("without", "with_pdf"):
            bench.providers.script([Text("The summary. ", delay=0.0), Text("Done.", delay=0.0)])
            with bench.client() as http:
                conversation = http.post("/api/conversations/", json={"name": f"{case} {round_number}"}).json()["id"]
                ids = []
                if case == "with_pdf":
                    response = http.post(
                        f"/api/conversations/{conversation}/attachments/",
                        files={"file": ("report.pdf", document, "application/pdf")},
                    )
                    response.raise_for_status()
                    ids = [response.json()["id"]]
            measured[case].append(await first_delta(bench, conversation, ids) * 1000)
    summary: dict[str, object] = {"turns_each": TURNS, "pdf_pages": PAGES, "pdf_bytes": len(document)}
    for case, values in measured.items():
        p50, p95 = percentile(values, 50), percentile(values, 95)
        summary[case] = {"first_delta_ms_p50": round(p50, 1), "first_delta_ms_p95": round(p95, 1)}
    summary["pdf_cost_ms_p50"] = round(percentile(measured["with_pdf"], 50) - percentile(measured["without"], 50), 1)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    arguments = parser.parse_args()
    bench = start(database=arguments.database)
    try:
        uploads = bench_uploads(bench)
        print(
            f"upload of {FILE_MAX} bytes: p50 {uploads['seconds_p50']} s, max {uploads['seconds_max']} s, "
            f"{uploads['mb_per_second_p50']} MB/s"
        )
        turns = asyncio.run(bench_turns(bench))
        print(f"first delta without attachment: {turns['without']}")
        print(f"first delta with a {PAGES}-page PDF: {turns['with_pdf']}; cost at p50 {turns['pdf_cost_ms_p50']} ms")
    finally:
        bench.stop()
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"database": arguments.database, "upload": uploads, "turns": turns}, indent=2) + "\n")
    print(f"written to {RESULTS.relative_to(Path.cwd()) if RESULTS.is_relative_to(Path.cwd()) else RESULTS}")


if __name__ == "__main__":
    main()
