"""The output bound: at most a tool's limit of compact UTF-8 JSON, cut where it keeps the most shape."""

from __future__ import annotations

import json

import pytest

from tools.output import json_size, output_bound

LIMIT = 64 * 1024


def padded(size: int, *, char: str = "a") -> dict[str, str]:
    """An object whose compact JSON is exactly `size` bytes."""
    overhead = json_size({"text": ""})
    width = len(char.encode())
    body = size - overhead
    return {"text": char * (body // width) + "a" * (body % width)}


@pytest.mark.parametrize("char", ["a", "é", "漢", "😀"])
def test_it_keeps_output_of_exactly_the_limit_and_cuts_one_byte_more(char):
    exact = padded(LIMIT, char=char)
    assert json_size(exact) == LIMIT
    assert output_bound(exact, limit=LIMIT) == exact

    over = padded(LIMIT + 1, char=char)
    cut = output_bound(over, limit=LIMIT)
    assert cut["truncated"] is True
    assert json_size(cut) <= LIMIT
    assert over["text"].startswith(cut["text"].removesuffix("…"))
    assert len(over["text"]) == len(padded(LIMIT + 1, char=char)["text"])  # the input is left as it was


def test_it_cuts_the_longest_strings_first_and_keeps_the_rest():
    output = {"title": "Kitchen", "pages": [{"url": "/a", "body": "x" * 50_000}, {"url": "/b", "body": "y" * 50_000}]}
    cut = output_bound(output, limit=LIMIT)
    assert json_size(cut) <= LIMIT
    assert (cut["title"], cut["truncated"]) == ("Kitchen", True)
    assert [p["url"] for p in cut["pages"]] == ["/a", "/b"]
    assert output["pages"][0]["body"] == "x" * 50_000


def test_it_cuts_escaped_characters_by_their_escaped_size():
    output = {"text": "\x01" * 20_000}  # six bytes each as JSON
    cut = output_bound(output, limit=LIMIT)
    assert json_size(cut) <= LIMIT
    assert cut["truncated"] is True


def test_it_wraps_output_that_is_not_an_object():
    output = list(range(30_000))
    cut = output_bound(output, limit=LIMIT)
    assert cut["truncated"] is True
    assert json_size(cut) <= LIMIT
    assert json.dumps(output, separators=(",", ":")).startswith(cut["output"])


def test_it_wraps_an_object_of_many_small_values():
    output = {f"k{i}": i for i in range(20_000)}
    cut = output_bound(output, limit=LIMIT)
    assert cut["truncated"] is True
    assert json_size(cut) <= LIMIT
