"""How much of CommonMark the chat page's Markdown renderer gets right, by the spec's own examples.

    .venv/bin/python bench/commonmark.py                 # prints a table per section
    .venv/bin/python bench/commonmark.py --failures 5    # and the first failing examples

Takes the examples of the npm package `commonmark-spec` (fetched once with `npm pack` into
bench/.cache/, or given with --spec), runs each through static/flarebot/markdown.js in
Debian's Chromium (the module as the page loads it, from a local origin served by
Playwright), and compares the DOM it builds with the spec's HTML, both in one canonical
form (attributes sorted, whitespace between blocks dropped, the spec's `class="language-x"`
read as our `data-lang="x"`).

Two columns: `strict`, and `chat` where the renderer's deliberate choices count as right:
a soft line break shows as a line break (both kinds of break read alike), links carry
rel/target and no title, only absolute http(s) and mailto links stay links (others keep
their label) and a picture becomes a link labelled by its alt text. Raw HTML is not read on
purpose (it must stay text): its sections are listed for completeness. Prints the table and writes
bench/results/commonmark.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "static"
CACHE = Path(__file__).resolve().parent / ".cache"
RESULTS = Path(__file__).resolve().parent / "results" / "commonmark.json"
SPEC_PACKAGE = "commonmark-spec@0.31.2"
CHROMIUM = os.environ.get("FLAREBOT_CHROMIUM", "/usr/bin/chromium")
ORIGIN = "http://markdown.bench"

# Sections of constructs the renderer does not read, on purpose: raw HTML stays text.
UNSUPPORTED = {"HTML blocks", "Raw HTML"}

CANON = (Path(__file__).resolve().parent / "commonmark.js").read_text()


def spec_text(path: Path | None) -> str:
    """Return the spec's text: the given file, or the npm package's, fetched once."""
    if path:
        return path.read_text()
    spec = CACHE / "package" / "spec.txt"
    if not spec.exists():
        CACHE.mkdir(exist_ok=True)
        packed = subprocess.run(
            ["npm", "pack", SPEC_PACKAGE, "--silent"], cwd=CACHE, check=True, capture_output=True, text=True
        ).stdout.split()[-1]
        subprocess.run(["tar", "xzf", packed], cwd=CACHE, check=True)
    return spec.read_text()


def examples(text: str) -> list[dict[str, Any]]:
    """Split the spec into its examples, as the package's index.js does."""
    text = re.sub(r"^<!-- END TESTS -->(.|\n)*", "", text.replace("\r\n", "\n"), flags=re.M)
    found: list[dict[str, Any]] = []
    section = ""
    pattern = re.compile(r"^`{32} example\n([\s\S]*?)^\.\n([\s\S]*?)^`{32}$|^#{1,6} *(.*)$", re.M)
    for match in pattern.finditer(text):
        if match.group(3) is not None:
            section = match.group(3)
        else:
            found.append(
                {
                    "markdown": match.group(1).replace("→", "\t"),
                    "html": match.group(2).replace("→", "\t"),
                    "section": section,
                    "number": len(found) + 1,
                }
            )
    return found


def run(cases: list[dict[str, Any]]) -> list[list[Any]]:
    from playwright.sync_api import Route, sync_playwright

    def serve(route: Route) -> None:
        path = route.request.url.removeprefix(ORIGIN)
        if path == "/":
            route.fulfill(body="<!doctype html><title>CommonMark</title>", content_type="text/html")
            return
        file = (STATIC / path.removeprefix("/static/")).resolve()
        if STATIC in file.parents and file.is_file():
            route.fulfill(body=file.read_bytes(), content_type="text/javascript")
        else:
            route.fulfill(status=404, body="")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.route(f"{ORIGIN}/**", serve)
        page.goto(f"{ORIGIN}/")
        page.evaluate(CANON)
        outcome: list[list[Any]] = page.evaluate(
            "(cases) => window.compare(cases)", [{"markdown": c["markdown"], "html": c["html"]} for c in cases]
        )
        browser.close()
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", type=Path, help="spec.txt of commonmark-spec (fetched with npm otherwise)")
    parser.add_argument("--failures", type=int, default=0, help="show this many failing examples per section")
    args = parser.parse_args()

    cases = examples(spec_text(args.spec))
    outcome = run(cases)
    sections: dict[str, dict[str, Any]] = defaultdict(lambda: {"examples": 0, "strict": 0, "chat": 0, "failing": []})
    for case, (strict, chat, actual) in zip(cases, outcome, strict=True):
        entry = sections[case["section"]]
        entry["examples"] += 1
        entry["strict"] += bool(strict)
        entry["chat"] += bool(chat)
        if not chat:
            entry["failing"].append({"number": case["number"], "markdown": case["markdown"], "got": actual})

    def line(name: str, entry: dict[str, Any]) -> str:
        n = entry["examples"]
        return f"{name:<42} {n:>4} {entry['strict'] / n:>7.0%} {entry['chat'] / n:>7.0%}"

    print(f"{'section':<42} {'n':>4} {'strict':>7} {'chat':>7}")
    totals = {"supported": {"examples": 0, "strict": 0, "chat": 0}, "all": {"examples": 0, "strict": 0, "chat": 0}}
    for name, entry in sections.items():
        supported = name not in UNSUPPORTED
        print(line(name, entry) + ("" if supported else "   (not supported)"))
        for key in ("examples", "strict", "chat"):
            totals["all"][key] += entry[key]
            if supported:
                totals["supported"][key] += entry[key]
        for failing in entry["failing"][: args.failures]:
            print(f"    #{failing['number']}: {failing['markdown']!r} -> {failing['got'][:160]!r}")
    print(line("supported sections", totals["supported"]))
    print(line("all sections", totals["all"]))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "spec": SPEC_PACKAGE,
                "sections": {
                    name: {k: entry[k] for k in ("examples", "strict", "chat")} | {"supported": name not in UNSUPPORTED}
                    for name, entry in sections.items()
                },
                "totals": totals,
            },
            indent=2,
        )
    )
    print(f"written to {RESULTS.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
