"""Every command a Flarebot message tells a person to run is spelled as the README's user runs it."""

from __future__ import annotations

import ast
import re

from flarebot.core.env import BASE_DIR
from flarebot.core.hints import BUILD_SANDBOX_IMAGE_COMMAND, CREATE_OWNER_COMMAND, PLAYWRIGHT_INSTALL_COMMAND
from tests.support.production_imports import production_files

# `python manage.py ...` or `python -m ...` not preceded by `.venv/bin/`.
BARE_PYTHON = re.compile(r"(?<!\.venv/bin/)\bpython3?\s+(manage\.py|-m\s)")


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def bare_hints_in_python(source: str) -> list[str]:
    """String literals (not docstrings) that name a bare `python` command."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and BARE_PYTHON.search(node.value)
    ]


def test_the_hints_name_the_venvs_python():
    assert CREATE_OWNER_COMMAND == ".venv/bin/python manage.py createowner --username NAME"
    assert BUILD_SANDBOX_IMAGE_COMMAND == ".venv/bin/python manage.py build_sandbox_image"
    assert PLAYWRIGHT_INSTALL_COMMAND == ".venv/bin/python -m playwright install chromium"


def test_no_message_in_the_code_names_a_bare_python():
    found = {
        str(path.relative_to(BASE_DIR)): hints
        for path in production_files()
        if (hints := bare_hints_in_python(path.read_text(encoding="utf-8")))
    }

    assert found == {}


def test_no_page_names_a_bare_python():
    pages = [*(BASE_DIR / "templates").glob("*.html"), *(BASE_DIR / "static" / "flarebot").glob("*.js")]
    found = [str(page.name) for page in pages if BARE_PYTHON.search(page.read_text(encoding="utf-8"))]

    assert pages
    assert found == []


def test_the_check_sees_a_bare_python_in_a_message_but_not_in_a_docstring():
    source = (
        '"""Run `python manage.py x`."""\n'
        'HINT = "run `python manage.py migrate` first"\n'
        'OK = ".venv/bin/python -m pip"\n'
    )

    assert bare_hints_in_python(source) == ["run `python manage.py migrate` first"]
