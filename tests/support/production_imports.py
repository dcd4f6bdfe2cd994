"""Import every production module in the interpreter that runs this, and find every import.

Run as `python -m tests.support.production_imports` from the checkout by
tests/core/test_requirements.py (in a venv built from requirements.txt alone) and by the
newcomer check of CI (in the venv `make run` built). Two checks, so that an import inside
a function is caught too:

1. every `import x` / `from x import y` written anywhere in a production module names a
   top-level module this interpreter can find (the standard library, the project's own
   packages, or an installed distribution);
2. every production module imports, with Django set up on a scratch data dir (settings,
   apps, migrations, management commands, the ASGI and Celery entry points, every tool).

It prints one JSON line: {"modules": N, "unresolved": [...], "failed": [...]}, and exits 1
when either list is not empty. It uses the standard library only until Django is set up.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
# The project's production packages: what `make run` runs. tests/, bench/ and scripts/ are not.
PRODUCTION_PACKAGES = ("flarebot", "conversations", "memory", "tasks", "tools", "settings_ui")
PRODUCTION_FILES = ("manage.py",)


def production_files() -> list[Path]:
    """Every Python file `make run` may execute."""
    files = [BASE_DIR / name for name in PRODUCTION_FILES]
    for package in PRODUCTION_PACKAGES:
        files.extend(sorted((BASE_DIR / package).rglob("*.py")))
    return [path for path in files if "__pycache__" not in path.parts]


def module_name(path: Path) -> str:
    relative = path.relative_to(BASE_DIR).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_top_levels(path: Path) -> set[str]:
    """The top-level names of every absolute import in a file, wherever it is written."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def unresolved_imports(files: list[Path]) -> list[str]:
    """`file: name` for every imported top-level module this interpreter cannot find."""
    found: list[str] = []
    for path in files:
        for name in sorted(imported_top_levels(path)):
            if name in sys.stdlib_module_names:
                continue
            if importlib.util.find_spec(name) is None:
                found.append(f"{_shown(path)}: {name}")
    return found


def _shown(path: Path) -> str:
    return str(path.relative_to(BASE_DIR)) if path.is_relative_to(BASE_DIR) else str(path)


def failed_imports(files: list[Path]) -> list[str]:
    """`module: error` for every production module that does not import."""
    failed: list[str] = []
    for path in files:
        if path.name == "manage.py":
            continue
        name = module_name(path)
        try:
            importlib.import_module(name)
        except Exception as error:  # every failure is the report
            last = traceback.format_exception_only(type(error), error)[-1].strip()
            failed.append(f"{name}: {last}")
    return failed


def main() -> int:
    sys.path.insert(0, str(BASE_DIR))
    files = production_files()
    unresolved = unresolved_imports(files)
    scratch = tempfile.mkdtemp(prefix="flarebot-imports-")
    for name in list(os.environ):
        if name.startswith(("FLAREBOT_", "DJANGO_")) or name in ("DATABASE_URL", "REDIS_URL"):
            del os.environ[name]
    os.environ["FLAREBOT_DATA_DIR"] = scratch
    os.environ["DJANGO_SETTINGS_MODULE"] = "flarebot.settings"
    import django

    django.setup()
    failed = failed_imports(files)
    print(json.dumps({"modules": len(files), "unresolved": unresolved, "failed": failed}))
    return 1 if unresolved or failed else 0


if __name__ == "__main__":
    sys.exit(main())
