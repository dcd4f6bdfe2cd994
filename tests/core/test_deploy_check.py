"""`manage.py check --deploy` in production mode: no warnings, and no start without an origin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from flarebot.core.env import BASE_DIR

UNSET = {"DATABASE_URL", "FLAREBOT_ORIGIN", "FLAREBOT_SECRET_KEY", "FLAREBOT_SECRET_KEY_FILE", "FLAREBOT_MODE"}


def manage(data_dir: Path, *args: str, **overrides: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in UNSET}
    env.update(DJANGO_SETTINGS_MODULE="flarebot.settings", FLAREBOT_DATA_DIR=str(data_dir), **overrides)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_passes_the_deploy_check_in_production_mode(tmp_path):
    result = manage(
        tmp_path,
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        FLAREBOT_MODE="production",
        FLAREBOT_ORIGIN="https://flarebot.example.org",
    )

    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


def test_it_refuses_production_mode_without_an_origin(tmp_path):
    result = manage(tmp_path, "check", "--deploy", FLAREBOT_MODE="production")

    assert result.returncode != 0
    assert "FLAREBOT_ORIGIN is required in production mode" in result.stderr
