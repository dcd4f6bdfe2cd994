"""The shared text rules: counting, digits, and the characters that disguise a text."""

from __future__ import annotations

import pytest

from flarebot.core.text import (
    ascii_whole_number,
    has_disguising_characters,
    has_lone_surrogates,
    json_text_safe,
    strip_disguising_characters,
    utf16_length,
)


@pytest.mark.parametrize(("text", "units"), [("", 0), ("abc", 3), ("é", 1), ("😀", 2), ("\ud800", 1), ("a\udfffb", 3)])
def test_it_counts_utf16_units_as_a_browser_does_even_for_a_lone_surrogate(text, units):
    assert utf16_length(text) == units


def test_it_finds_lone_surrogates_but_not_pairs():
    assert has_lone_surrogates("a\ud800")
    assert has_lone_surrogates("\udc00")
    assert not has_lone_surrogates("😀 ok")


@pytest.mark.parametrize(("raw", "number"), [("0", 0), ("42", 42), ("007", 7), ("9" * 18, 10**18 - 1)])
def test_it_reads_ascii_digits(raw, number):
    assert ascii_whole_number(raw) == number


@pytest.mark.parametrize("raw", ["", "9" * 19, "²", "\u0663", "\uff11", "-1", "+1", " 1", "1.0", "1e3", "0x1", "1_0"])
def test_it_reads_nothing_else_as_a_number(raw):
    assert ascii_whole_number(raw) is None


def test_it_strips_exactly_the_characters_it_refuses():
    disguised = "\u202einvoice\u200b \u2066x\u2069\u200f 👩\u200d💻 a\u200db\ufeff"

    stripped = strip_disguising_characters(disguised)

    assert has_disguising_characters(disguised)
    assert stripped == "invoice x 👩\u200d💻 ab"
    assert not has_disguising_characters(stripped)
    assert strip_disguising_characters("plain text") == "plain text"


def test_it_makes_nul_and_lone_surrogates_storable_everywhere_in_a_value():
    value = {"a\x00": ["x\ud800y", {"k": "\udfff"}], "n": 3}

    assert json_text_safe(value) == {"a\ufffd": ["x\ufffdy", {"k": "\ufffd"}], "n": 3}
