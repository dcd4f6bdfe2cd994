"""A private Flarebot stack for benchmarks: fresh database, own Redis db, real processes.

Starts the loopback model providers, migrates a fresh PostgreSQL database (or a SQLite
file), creates the owner, starts daphne + Celery worker + beat with `flarebot.core.stack`,
signs in over real HTTP and stores an Anthropic key through the API.

When the stack stops, the bench says how many warnings and errors its processes logged
(a slow burst often shows there first: a lost Redis connection, a retried claim), and
with `FLAREBOT_BENCH_KEEP_LOGS=<dir>` it keeps the logs there instead of deleting them.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.provider_process import ProviderProcess  # noqa: E402
from flarebot.core.stack import Stack, process_specs  # noqa: E402
from tests.support.resources import claim_redis_db, free_port, release_redis_db  # noqa: E402

PASSWORD = "bench-owner-passphrase-" + secrets.token_hex(4)
KEY = "sk-ant-bench-" + secrets.token_hex(16)


@dataclass
class BenchStack:
    stack: Stack
    providers: ProviderProcess
    base_url: str
    origin: str
    cookie: str
    env: dict[str, str]
    data_dir: Path
    database: str | None
    redis_url: str
    run_id: str

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, headers={"Origin": self.origin, "Cookie": self.cookie}, timeout=30)

    def stop(self) -> None:
        self.stack.stop()
        self.providers.stop()
        logs_report(self.data_dir / "logs", keep=os.environ.get("FLAREBOT_BENCH_KEEP_LOGS"), run_id=self.run_id)
        release_redis_db(self.redis_url, self.run_id)
        if self.database:
            with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
        shutil.rmtree(self.data_dir, ignore_errors=True)


LOGGED_PROBLEM = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b")


def logs_report(log_dir: Path, *, keep: str | None, run_id: str) -> None:
    """Print what the stack's processes logged above INFO; copy the logs to `keep` if given."""
    for log in sorted(log_dir.glob("*.log")):
        problems = [line for line in log.read_text("utf-8", "replace").splitlines() if LOGGED_PROBLEM.search(line)]
        if problems:
            first = problems[0][:300]
            print(f"{log.stem} logged {len(problems)} warnings or errors; the first: {first}", file=sys.stderr)
    if keep:
        kept = Path(keep) / f"bench-{run_id}"
        shutil.copytree(log_dir, kept, dirs_exist_ok=True)
        print(f"stack logs kept in {kept}", file=sys.stderr)


def start(*, database: str = "postgres", worker_threads: int = 128, worker_processes: int = 1) -> BenchStack:
    run_id = secrets.token_hex(4)
    data_dir = Path(tempfile.mkdtemp(prefix=f"flarebot-bench-{run_id}-"))
    providers = ProviderProcess(free_port())
    port = free_port()
    redis_url = claim_redis_db("redis://127.0.0.1:6379", run_id)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "flarebot.settings",
        "FLAREBOT_DATA_DIR": str(data_dir),
        "FLAREBOT_PORT": str(port),
        "REDIS_URL": redis_url,
        "FLAREBOT_ANTHROPIC_BASE_URL": providers.anthropic_url,
        "FLAREBOT_OPENAI_BASE_URL": providers.openai_url,
        "FLAREBOT_OWNER_PASSWORD": PASSWORD,
        "PYTHONUNBUFFERED": "1",
    }
    for name in ("FLAREBOT_ORIGIN", "FLAREBOT_MODE", "FLAREBOT_LOCAL_BASE_URL", "FLAREBOT_LOCAL_MODELS"):
        env.pop(name, None)
    db_name = None
    if database == "postgres":
        db_name = f"flarebot_bench_{run_id}"
        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{db_name}"')
        env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{db_name}"
    else:
        env.pop("DATABASE_URL", None)
    python = sys.executable
    subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    subprocess.run(
        [python, "manage.py", "createowner", "--username", "bench"],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    specs = process_specs(
        bind="127.0.0.1",
        port=port,
        worker_name=f"bench-{run_id}@localhost",
        worker_threads=worker_threads,
        worker_processes=worker_processes,
    )
    stack = Stack(specs=specs, env=env, log_dir=data_dir / "logs", cwd=ROOT)
    stack.start()
    base_url = f"http://127.0.0.1:{port}"

    def web_up() -> bool:
        try:
            return httpx.get(f"{base_url}/status/", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    stack.wait_for(web_up, timeout=60, what="daphne")
    stack.wait_for(lambda: " ready." in stack.log_text("worker"), timeout=60, what="worker")
    cookie = _sign_in(base_url, base_url)
    bench = BenchStack(stack, providers, base_url, base_url, cookie, env, data_dir, db_name, redis_url, run_id)
    with bench.client() as client:
        client.put("/api/settings/provider-keys/anthropic/", json={"key": KEY}).raise_for_status()
    return bench


def _sign_in(base_url: str, origin: str) -> str:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        page = client.get("/login/")
        csrf = page.cookies.get("__Host-flarebot-csrf") or ""
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token is not None
        response = client.post(
            "/login/",
            data={"username": "bench", "password": PASSWORD, "csrfmiddlewaretoken": token.group(1)},
            headers={"Origin": origin, "Cookie": f"__Host-flarebot-csrf={csrf}"},
        )
        assert response.status_code == 302, response.text[:200]
        session = response.cookies.get("__Host-flarebot-session")
        assert session
        return f"__Host-flarebot-session={session}"
