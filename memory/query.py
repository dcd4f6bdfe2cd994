"""Search words from free text: how a query becomes the tokens that reach the database.

A query is at most QUERY_MAX UTF-16 code units. It is cut into Unicode word tokens
(letters and digits; everything else, `_` included, separates them), lowercased, common
English stop words dropped, duplicates dropped, and at most TOKENS_MAX kept. A token can
only hold word characters, so quotes, `*`, `-`, `:`, parentheses and the like can never
reach the database; `NEAR`, `OR`, `AND` and `NOT` are ordinary words (the last three are
stop words). `memory.sql` combines the tokens with OR, each as a bound parameter.
"""

from __future__ import annotations

import re

QUERY_MAX = 1_000  # UTF-16 code units, as the contract counts text
TOKENS_MAX = 24

_WORD = re.compile(r"[^\W_]+")

# The Snowball English list, which PostgreSQL's `english` configuration also drops: words
# too common to say what a fact is about.
STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can did do does doing don down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own s same she
    should so some such t than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    you your yours yourself yourselves
    """.split()  # noqa: SIM905  (a word list reads better as text)
)


def utf16_prefix(text: str, units: int) -> str:
    """Return the longest start of text of at most `units` UTF-16 code units (never half a pair)."""
    if len(text) <= units // 2:
        return text
    used = 0
    for index, character in enumerate(text):
        used += 2 if ord(character) > 0xFFFF else 1
        if used > units:
            return text[:index]
    return text


def query_tokens(text: str) -> list[str]:
    """Return the search tokens of a query (assumed within QUERY_MAX), at most TOKENS_MAX."""
    tokens: list[str] = []
    for match in _WORD.finditer(text):
        token = match.group().lower()
        if token in STOP_WORDS or token in tokens:
            continue
        tokens.append(token)
        if len(tokens) == TOKENS_MAX:
            break
    return tokens
