"""`python manage.py runstack`: run web, worker and beat in the foreground until Ctrl-C.

It hands over at once to the supervisor (`python -m flarebot.supervisor`, what `make run`
runs), a small process that imports no Django app. The supervisor starts this command
again as `runstack --report`: a helper that loads Django while the processes start and,
once the supervisor says every process is ready, prints what needs the database (the
one-time setup link while no owner exists, what this run's workers found missing), then
the address, and exits.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from flarebot.core.env import BASE_DIR
from flarebot.core.hints import CREATE_OWNER_COMMAND
from flarebot.core.installation import installation_get_verified
from flarebot.core.models import Heartbeat, Installation
from flarebot.core.probes import ProbeResult, probe_labels
from flarebot.core.setup_link import SETUP_PATH, setup_token_issue


class Command(BaseCommand):
    help = "Run Flarebot's web, worker and beat processes in the foreground."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--report", action="store_true", help="(the supervisor's helper; not for people)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["report"]:
            self._report()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        path = os.pathsep.join(p for p in (str(BASE_DIR), os.environ.get("PYTHONPATH")) if p)
        os.execve(sys.executable, [sys.executable, "-m", "flarebot.supervisor"], {**os.environ, "PYTHONPATH": path})  # noqa: S606

    def _report(self) -> None:
        """Wait for the supervisor's word (every process ready), then print the warnings and the address."""
        line = sys.stdin.readline()
        if not line.strip():
            return  # the supervisor stopped before every process was ready
        started = datetime.fromtimestamp(float(line), tz=UTC)
        config = settings.CONFIG
        if not Installation.objects.exists():
            token = setup_token_issue(data_dir=config.data_dir)
            # The one place the token is shown: this screen (never a log).
            self.stdout.write(
                "warning: no owner yet. Create one in the browser with this one-time link:\n"
                f"  {config.origin}{SETUP_PATH}?token={token}\n"
                f"or in another terminal: {CREATE_OWNER_COMMAND}"
            )
        elif installation_get_verified() is None:
            self.stdout.write("warning: the installation no longer matches its owner; Flarebot answers 503.")
        labels = probe_labels()
        for name, found in _probes_of_this_run(started).items():
            if found["state"] != "ok":
                fix = f" {found['fix']}" if found["fix"] else ""
                self.stdout.write(f"warning: {labels.get(name, name)} is missing: {found['detail']}{fix}")
        self.stdout.write(f"Logs: {config.data_dir / 'logs'}")
        self.stdout.write(f"Open {config.origin}/ (Ctrl-C stops everything)")
        self.stdout.flush()


def _probes_of_this_run(started: datetime, wait: float = 10.0) -> dict[str, ProbeResult]:
    """What this run's workers found on the machine (their first heartbeat carries it)."""
    give_up = time.monotonic() + wait
    while time.monotonic() < give_up:
        beats = Heartbeat.objects.filter(kind="worker", seen_at__gte=started).values_list("detail", flat=True)
        found = next((detail["probes"] for detail in beats if detail.get("probes")), None)
        if found is not None or not probe_labels():
            return found or {}
        time.sleep(0.2)
    return {}
