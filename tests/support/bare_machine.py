"""`make run` on a machine with nothing but Python, inside a namespace the test made.

Run by tests/core/test_first_run.py as root under `unshare -n -m`: a fresh network
namespace has an empty loopback (no Redis, no PostgreSQL answers), and with
`--hide-redis-server` every `redis-server` on the PATH is covered by an empty file that
cannot run. It starts `make run` with no REDIS_URL and no DATABASE_URL, waits for
/status/, makes the owner, stores a key for the loopback provider, sends one message and
waits for its turn to end. It prints one JSON line: the turn's status and answer, and
what `make run` printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx

BASE_DIR = Path(__file__).resolve().parents[2]
PASSWORD = "a-long-owner-passphrase-42"
KEY = "sk-ant-api03-Qw7eRt9yUi1oPa3sDf5gHj7k"


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _hide(program: str, scratch: Path) -> None:
    empty = scratch / "not-a-program"
    empty.write_text("")
    empty.chmod(0o644)
    while (found := shutil.which(program)) is not None:
        subprocess.run(["mount", "--bind", str(empty), found], check=True)
        if shutil.which(program) == found:  # mounted over, but still found: give up loudly
            raise SystemExit(f"could not hide {found}")


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hide-redis-server", action="store_true")
    hide = parser.parse_args().hide_redis_server
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    scratch = Path(tempfile.mkdtemp(prefix="flarebot-bare-"))
    if hide:
        _hide("redis-server", scratch)
    sys.path.insert(0, str(BASE_DIR))
    from tests.support.fake_providers import FakeProviders

    providers = FakeProviders(port=_free_port()).start()
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLAREBOT_", "DJANGO_"))}
    env.pop("REDIS_URL", None)
    env.pop("DATABASE_URL", None)
    env |= {
        "FLAREBOT_DATA_DIR": str(scratch / "data"),
        "FLAREBOT_PORT": str(port),
        "FLAREBOT_ANTHROPIC_BASE_URL": f"http://127.0.0.1:{providers.port}",
        "FLAREBOT_WORKER_PROCESSES": "1",
        "FLAREBOT_WORKER_CONCURRENCY": "4",
        "FLAREBOT_OWNER_PASSWORD": PASSWORD,
    }
    run = subprocess.Popen(
        ["make", "--no-print-directory", "run"],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    result: dict[str, object] = {}
    seen: list[str] = []
    assert run.stdout is not None
    reader = threading.Thread(target=lambda: seen.extend(iter(run.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        # Everything is ready (and said so) before the owner exists.
        _wait(lambda: any(line.startswith("Open http") for line in seen) or run.poll() is not None, 180, "ready")
        if run.poll() is None and _answers(f"{base}/status/"):
            manage = [str(BASE_DIR / ".venv" / "bin" / "python"), "manage.py"]
            subprocess.run([*manage, "createowner", "--username", "owner"], cwd=BASE_DIR, env=env, check=True)
            result = _one_turn(base)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGINT)
        try:
            run.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        reader.join(timeout=5)
        providers.stop()
    print(json.dumps({**result, "output": "".join(seen), "returncode": run.returncode}))


def _cookie(response: httpx.Response, name: str) -> str:
    for header in response.headers.get_list("set-cookie"):
        key, _, rest = header.partition("=")
        if key == name:
            return rest.split(";", 1)[0]
    raise SystemExit(f"no {name} cookie")


def _one_turn(base: str) -> dict[str, object]:
    """Sign in as a browser does (CSRF cookie and token), then use the API with the session."""
    page = httpx.get(f"{base}/login/", timeout=10)
    token = page.text.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    csrf = _cookie(page, "__Host-flarebot-csrf")
    form = {"username": "owner", "password": PASSWORD, "csrfmiddlewaretoken": token}
    signed = httpx.post(
        f"{base}/login/", data=form, headers={"Origin": base, "Cookie": f"__Host-flarebot-csrf={csrf}"}, timeout=10
    )
    assert signed.status_code == 302, signed.text
    headers = {"Origin": base, "Cookie": f"__Host-flarebot-session={_cookie(signed, '__Host-flarebot-session')}"}
    with httpx.Client(base_url=base, headers=headers, timeout=10) as client:
        client.put("/api/settings/provider-keys/anthropic/", json={"key": KEY}).raise_for_status()
        conversation = client.post("/api/conversations/", json={}).json()["id"]
        body = {"request_id": str(uuid.uuid4()), "text": "Hello from a bare machine"}
        client.post(f"/api/conversations/{conversation}/messages/", json=body).raise_for_status()

        def ended() -> bool:
            turns = client.get(f"/api/conversations/{conversation}/messages/").json()["turns"]
            return bool(turns) and turns[-1]["status"] not in ("queued", "running")

        _wait(ended, 90, "the turn to end")
        transcript = client.get(f"/api/conversations/{conversation}/messages/").json()
    answer = "".join(
        part.get("text", "") for m in transcript["messages"] if m["role"] == "assistant" for part in m["parts"]
    )
    return {"status": transcript["turns"][-1]["status"], "answer": answer}


if __name__ == "__main__":
    main()
