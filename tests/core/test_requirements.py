"""`make run` needs only requirements.txt: a venv built from it alone imports every production module.

The test builds that venv as `make run` does (pip, requirements.txt, nothing else), asks
`pip check` whether the pins agree, and runs tests/support/production_imports.py in it:
every import written anywhere in a production module resolves there, and every module
imports with Django set up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from flarebot.core.env import BASE_DIR

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory) -> str:
    venv = tmp_path_factory.mktemp("requirements-only") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", "requirements.txt"],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    return python


def test_the_pins_agree_with_each_other(bare_venv):
    check = subprocess.run([bare_venv, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)

    assert check.returncode == 0, check.stdout + check.stderr


def test_every_production_module_imports_with_requirements_txt_alone(bare_venv):
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    run = subprocess.run(
        [bare_venv, "-m", "tests.support.production_imports"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["unresolved"] == []
    assert report["failed"] == []
    assert report["modules"] > 150  # it looked at the whole tree
    assert run.returncode == 0, run.stderr[-3000:]


def test_the_checker_finds_an_import_inside_a_function_that_the_venv_lacks(bare_venv, tmp_path):
    stray = tmp_path / "stray.py"
    stray.write_text("import json\n\n\ndef later() -> None:\n    import httpx\n    from websockets import connect\n")
    script = (
        "import json, pathlib, sys\n"
        "from tests.support.production_imports import unresolved_imports\n"
        "print(json.dumps(unresolved_imports([pathlib.Path(sys.argv[1])])))\n"
    )
    run = subprocess.run(
        [bare_venv, "-c", script, str(stray)], cwd=BASE_DIR, capture_output=True, text=True, timeout=120
    )

    assert json.loads(run.stdout) == [f"{stray}: httpx", f"{stray}: websockets"], run.stderr
