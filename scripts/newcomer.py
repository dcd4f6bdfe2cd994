"""CI's first step: take the newcomer's path through a fresh clone before the suite runs.

From the repository it is run in (`.venv/bin/python scripts/newcomer.py`, by `.ci/run`),
it clones the current commit into a temporary folder and there, as a new user would:

1. `make run`, which builds the clone's own `.venv` from requirements.txt only, until it
   prints the address (`pip check` and an import of every production module then run in
   that venv too);
2. `.venv/bin/python manage.py createowner --username ...` with FLAREBOT_OWNER_PASSWORD;
3. signs in over HTTP, as the sign-in page does;
4. sends one message over the conversation socket and reads the streamed answer of a
   loopback OpenAI-compatible model (FLAREBOT_LOCAL_BASE_URL);
5. sends SIGINT, as Ctrl-C does, and expects every process gone within 10 s.

Any failure stops it with exit 1, the screen `make run` showed and the last lines of each
log. This side (the client, the loopback model) runs in the checkout's development venv;
nothing of it reaches the clone.
"""

from __future__ import annotations

import argparse
import contextlib
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect
from websockets.typing import Origin

BASE_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BASE_DIR))

from tests.support.fake_providers import FakeProviders, Text  # noqa: E402
from tests.support.resources import free_port  # noqa: E402

USERNAME = "newcomer"
PASSWORD = "a-newcomers-long-passphrase-31"
MODEL = "newcomer-model"
ANSWER = ["Hello", ", newcomer", ": this answer", " was streamed."]
READY_TIMEOUT = 900.0  # the first `make run` installs every requirement
STOP_TIMEOUT = 10.0
LOG_TAIL = 40


class NewcomerFailed(Exception):
    """A step of the newcomer's path did not work."""


class Screen:
    """What `make run` printed, as the newcomer saw it, echoed to CI's log as it comes."""

    def __init__(self, process: subprocess.Popen[str], *, echo: bool = True) -> None:
        self.lines: list[str] = []
        self.echo = echo
        self._reader = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._reader.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in iter(process.stdout.readline, ""):
            self.lines.append(line)
            if self.echo:
                print(f"  make run | {line}", end="", flush=True)

    def text(self) -> str:
        return "".join(self.lines)


def step(name: str, started: float) -> None:
    print(f"newcomer: {name} ({time.monotonic() - started:.1f} s)", flush=True)


def clone(into: Path, revision: str) -> Path:
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{revision}^{{commit}}"],
        cwd=BASE_DIR,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    target = into / "flarebot"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(BASE_DIR), str(target)], check=True)
    subprocess.run(["git", "checkout", "--quiet", commit], cwd=target, check=True)
    print(f"newcomer: cloned {commit[:12]} into {target}", flush=True)
    return target


def newcomer_env(model_url: str, port: int) -> dict[str, str]:
    """The environment of someone who just cloned: nothing of Flarebot's, nothing of this venv."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("FLAREBOT_", "DJANGO_"))
        and key not in {"DATABASE_URL", "REDIS_URL", "VIRTUAL_ENV", "PYTHONPATH", "CI"}
    }
    own_bin = str(BASE_DIR / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(part for part in env.get("PATH", "").split(os.pathsep) if part != own_bin)
    env |= {"FLAREBOT_PORT": str(port), "FLAREBOT_LOCAL_BASE_URL": model_url, "FLAREBOT_LOCAL_MODELS": MODEL}
    return env


def make_run_started(checkout: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """`make run` in its own session (Ctrl-C reaches its whole group), its screen on a pipe."""
    return subprocess.Popen(
        ["make", "--no-print-directory", "run"],
        cwd=checkout,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def wait_for(condition, timeout: float, what: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            raise NewcomerFailed(f"`make run` exited with {process.returncode} while waiting for {what}")
        if time.monotonic() > deadline:
            raise NewcomerFailed(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.2)


def check_venv(checkout: Path, env: dict[str, str]) -> None:
    """The venv `make run` built holds what every production module imports, and agrees with itself."""
    python = str(checkout / ".venv" / "bin" / "python")
    pip_check = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    if pip_check.returncode != 0:
        raise NewcomerFailed(f"pip check in the newcomer's venv: {pip_check.stdout}{pip_check.stderr}")
    imports = subprocess.run(
        [python, "-m", "tests.support.production_imports"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if imports.returncode != 0:
        raise NewcomerFailed(f"production imports in the newcomer's venv: {imports.stdout}{imports.stderr[-2000:]}")


def create_owner(checkout: Path, env: dict[str, str]) -> None:
    result = subprocess.run(
        [".venv/bin/python", "manage.py", "createowner", "--username", USERNAME],
        cwd=checkout,
        env={**env, "FLAREBOT_OWNER_PASSWORD": PASSWORD},
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        raise NewcomerFailed(f"createowner failed: {result.stdout}{result.stderr}")


def _cookie(response: httpx.Response, name: str) -> str:
    # The cookies are Secure: an HTTP client's jar keeps them from plain http, a browser on loopback does not.
    for header in response.headers.get_list("set-cookie"):
        key, _, rest = header.partition("=")
        if key == name:
            return rest.split(";", 1)[0]
    raise NewcomerFailed(f"the answer set no {name} cookie (status {response.status_code})")


def sign_in(base: str) -> str:
    """Sign in through the sign-in page; return the session cookie's value."""
    with httpx.Client(base_url=base, timeout=10, trust_env=False) as client:
        page = client.get("/login/")
        if page.status_code != 200:
            raise NewcomerFailed(f"GET /login/ answered {page.status_code}")
        token = page.text.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
        form = {"username": USERNAME, "password": PASSWORD, "csrfmiddlewaretoken": token}
        csrf = _cookie(page, "__Host-flarebot-csrf")
        signed = client.post("/login/", data=form, headers={"Origin": base, "Cookie": f"__Host-flarebot-csrf={csrf}"})
        if signed.status_code != 302:
            raise NewcomerFailed(f"POST /login/ answered {signed.status_code}")
        return _cookie(signed, "__Host-flarebot-session")


def streamed_turn(base: str, session: str) -> list[str]:
    """Send one message over the socket; return the text deltas of its answer."""
    frames = turn_events(base, session, "Hello?", timeout=90)
    return [frame["data"]["text"] for frame in frames if frame["event"] == "text.delta"]


def turn_events(base: str, session: str, text: str, *, timeout: float) -> Iterator[dict[str, Any]]:
    """Send `text` in a new conversation over the socket; yield its turn's event frames until it completes.

    An error frame, a failed or cancelled turn, or no end within `timeout` s raises NewcomerFailed.
    """
    cookie = f"__Host-flarebot-session={session}"
    with httpx.Client(base_url=base, timeout=10, trust_env=False, headers={"Origin": base, "Cookie": cookie}) as api:
        created = api.post("/api/conversations/", json={})
        if created.status_code != 201:
            raise NewcomerFailed(f"POST /api/conversations/ answered {created.status_code}: {created.text[:300]}")
        conversation = created.json()["id"]
    url = f"{base.replace('http', 'ws', 1)}/ws/conversations/{conversation}/"
    with connect(
        url, origin=Origin(base), additional_headers={"Cookie": cookie}, proxy=None, open_timeout=10
    ) as socket:
        socket.send(json.dumps({"type": "user_message", "request_id": str(uuid.uuid4()), "text": text}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            frame = json.loads(socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if frame["type"] == "error":
                raise NewcomerFailed(f"the socket answered an error: {frame}")
            if frame["type"] != "event":
                continue
            if frame["event"] in {"turn.failed", "turn.cancelled"}:
                raise NewcomerFailed(f"the turn ended {frame['event']}: {frame['data']}")
            yield frame
            if frame["event"] == "turn.completed":
                return
    raise NewcomerFailed(f"the turn did not complete within {timeout:g} s")


def _process_table() -> dict[int, tuple[int, int, str]]:
    """Every live process: pid -> (parent pid, session id, command line)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if fields[0] != "Z":
            table[int(entry.name)] = (int(fields[1]), int(fields[3]), command)
    return table


def flarebot_processes(root: int, known: set[int] | None = None) -> dict[int, str]:
    """`make run` and everything it started: its descendants, whatever session each made for itself.

    `known` (pids seen earlier) keeps finding processes after their parent died and they
    were handed to init; so does the session of each (what a child of theirs inherits).
    """
    table = _process_table()
    found = {root} | (known or set())
    while True:
        more = {pid for pid, (parent, _, _) in table.items() if parent in found} - found
        if not more:
            break
        found |= more
    sessions = {table[pid][1] for pid in found if pid in table}
    found |= {pid for pid, (_, session, _) in table.items() if session in sessions}
    return {pid: table[pid][2] for pid in found if pid in table}


def stop_like_ctrl_c(process: subprocess.Popen[str]) -> None:
    """SIGINT to the foreground group, as a terminal's Ctrl-C; every process must be gone in 10 s."""
    before = flarebot_processes(process.pid)
    os.killpg(process.pid, signal.SIGINT)
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline and flarebot_processes(process.pid, set(before)):
        time.sleep(0.1)
    left = flarebot_processes(process.pid, set(before))
    if left:
        raise NewcomerFailed(
            f"{len(left)} of {len(before)} processes still ran {STOP_TIMEOUT:g} s after Ctrl-C: "
            + "; ".join(f"{pid} {command[:100]}" for pid, command in left.items())
        )
    process.wait(timeout=5)
    names = sorted({command.split(" -m ")[-1].split()[0] for command in before.values() if " -m " in command})
    print(f"newcomer: Ctrl-C stopped all {len(before)} processes ({', '.join(names)}) within {STOP_TIMEOUT:g} s")


def report_failure(error: Exception, screen: Screen | None, checkout: Path | None) -> None:
    print(f"\nnewcomer: FAILED: {error}", file=sys.stderr)
    if screen is not None:
        print("---- what `make run` showed ----", file=sys.stderr)
        print(screen.text(), file=sys.stderr)
    logs = sorted((checkout / "var" / "logs").glob("*.log")) if checkout is not None else []
    for log in logs:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()[-LOG_TAIL:]
        print(f"---- {log.name}, last {len(lines)} lines ----", file=sys.stderr)
        print("\n".join(lines), file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description="Take the newcomer's path through a fresh clone.")
    parser.add_argument("--commit", default="HEAD", help="the commit to clone (default: HEAD)")
    revision = parser.parse_args().commit
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="flarebot-newcomer-"))
    model = FakeProviders(port=free_port()).start()
    model.default_answer = [Text(chunk, delay=0.02) for chunk in ANSWER]
    run: subprocess.Popen[str] | None = None
    screen: Screen | None = None
    checkout: Path | None = None
    try:
        checkout = clone(scratch, revision)
        port = free_port()
        env = newcomer_env(model.local_url, port)
        base = f"http://127.0.0.1:{port}"
        run = make_run_started(checkout, env)
        screen = Screen(run)
        wait_for(
            lambda: any(line.startswith(f"Open {base}/") for line in screen.lines),
            READY_TIMEOUT,
            "the address line",
            run,
        )
        step("`make run` printed the address", started)
        check_venv(checkout, env)
        step("the venv from requirements.txt passes pip check and imports every production module", started)
        create_owner(checkout, env)
        session = sign_in(base)
        step("createowner, then signed in over HTTP", started)
        deltas = streamed_turn(base, session)
        if "".join(deltas) != "".join(ANSWER) or len(deltas) < 2:
            raise NewcomerFailed(f"the streamed answer was {deltas!r}, expected the chunks of {''.join(ANSWER)!r}")
        step(f"one turn streamed over the socket in {len(deltas)} deltas", started)
        stop_like_ctrl_c(run)
        step("done", started)
    except Exception as error:  # whatever broke, the newcomer's screen and logs say why
        report_failure(error, screen, checkout)
        return 1
    finally:
        if run is not None and run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        for pid in flarebot_processes(run.pid) if run is not None else {}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        model.stop()
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
