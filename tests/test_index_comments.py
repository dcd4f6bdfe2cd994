"""Every index and constraint comment names the code that uses it, and that code exists.

A comment beside an index says which query it serves (`# name, other_name: why`); when the
query's function is renamed or removed, the comment goes stale and the index looks needed
for nothing. This reads each comment's leading names and looks each up as a function.
"""

from __future__ import annotations

import ast
import re

from flarebot.core.env import BASE_DIR
from tests.support.production_imports import production_files

NAMED = re.compile(r"^\s*#\s*([a-z_][a-z0-9_]*(?:(?:, | and | / )[a-z_][a-z0-9_]*)*)\s*[:(]")


def defined_functions() -> set[str]:
    names: set[str] = set()
    for path in production_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
    return names


def index_comments() -> list[tuple[str, int, list[str]]]:
    """(file, line, names) of each comment right above an Index or a constraint of a model."""
    found = []
    for path in production_files():
        if path.name != "models.py":
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines[1:], start=2):
            if "models.Index(" not in line and "Constraint(" not in line:
                continue
            match = NAMED.match(lines[number - 2])
            if match:
                names = re.split(r", | and | / ", match.group(1))
                found.append((str(path.relative_to(BASE_DIR)), number - 1, names))
    return found


def test_every_function_an_index_comment_names_exists():
    functions = defined_functions()
    comments = index_comments()

    assert len(comments) > 20  # it read the models
    stale = [(where, line, name) for where, line, names in comments for name in names if name not in functions]
    assert stale == []
