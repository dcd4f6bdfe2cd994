"""What each of `make run`'s processes loads at its start (issue 30: the footprint).

Each process is imported as it starts, in a fresh interpreter, and its modules are read
from `sys.modules`: the supervisor loads no Django at all, the web and beat none of the
SDKs only a job uses, and a worker loads the provider SDKs once it is ready (the test of
`_providers_load` says which), Playwright and the Docker SDK on first use only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from flarebot.core.env import BASE_DIR

JOB_ONLY = ("anthropic", "openai", "playwright", "docker", "pypdf", "apprise")
WEB_SERVER = ("daphne", "twisted")
FIRST_USE = ("playwright", "docker")


def loaded_at_start(code: str, tmp_path: Path, *, whole: bool = False) -> set[str]:
    """The top-level packages (or, `whole`, the modules) a fresh interpreter holds after `code`."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "flarebot.settings",
        "FLAREBOT_DATA_DIR": str(tmp_path / "data"),
    }
    env.pop("DATABASE_URL", None)
    names = "sys.modules" if whole else "{m.split('.')[0] for m in sys.modules}"
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted({names})))"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def test_the_supervisor_loads_neither_django_nor_celery(tmp_path):
    loaded = loaded_at_start("import flarebot.supervisor", tmp_path)

    assert "flarebot" in loaded
    assert not loaded & {"django", "celery", "kombu", "rest_framework", "channels", *JOB_ONLY}


def test_the_web_process_loads_no_model_sdk_browser_or_docker(tmp_path):
    loaded = loaded_at_start('import flarebot.asgi\nfrom django.urls import resolve\nresolve("/status/")', tmp_path)

    assert {"django", "channels", "tools", "settings_ui"} <= loaded  # every page and route, the tools listed
    assert not loaded & set(JOB_ONLY)


def test_beat_loads_the_scheduler_but_no_job_code(tmp_path):
    start = "from flarebot.celery_beat import app\napp.loader.import_default_modules()\nimport tasks.beat"
    loaded = loaded_at_start(start, tmp_path)

    assert {"django", "django_celery_beat", "tasks"} <= loaded
    assert not loaded & {*JOB_ONLY, *WEB_SERVER}


WORKER_START = "from flarebot.celery import app\napp.loader.import_default_modules()\nimport conversations.jobs"
# What Django's system checks load (every URL, view and API), which Celery skips.
API_ONLY = ("rest_framework.fields", "drf_spectacular.openapi", "settings_ui.api", "conversations.api")


def test_a_worker_starts_with_every_job_but_no_sdk_playwright_docker_or_api(tmp_path):
    loaded = loaded_at_start(WORKER_START, tmp_path, whole=True)

    assert {"conversations.jobs", "tasks.jobs", "conversations.engine.runtime"} <= loaded
    packages = {name.split(".")[0] for name in loaded}
    assert not packages & {*JOB_ONLY, *WEB_SERVER, "psycopg"}  # psycopg: on PostgreSQL only
    assert not loaded & set(API_ONLY)


def test_the_supervisor_removes_the_setup_link_the_web_reads():
    from flarebot.core.setup_link import TOKEN_FILE
    from flarebot.supervisor import SETUP_TOKEN_FILE

    assert SETUP_TOKEN_FILE == TOKEN_FILE
