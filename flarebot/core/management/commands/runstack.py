"""`python manage.py runstack`: run web, worker and beat in the foreground until Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from flarebot.core.env import BASE_DIR
from flarebot.core.installation import installation_get_verified
from flarebot.core.redis_check import private_redis_argv, redis_is_reachable, wait_for_redis
from flarebot.core.stack import ProcessSpec, Stack, process_specs


class Command(BaseCommand):
    help = "Run Flarebot's web, worker and beat processes in the foreground."

    def handle(self, *args: Any, **options: Any) -> None:
        config = settings.CONFIG
        worker_name = f"worker-{os.getpid()}@{socket.gethostname()}"
        specs = process_specs(
            bind=config.bind,
            port=config.port,
            worker_name=worker_name,
            worker_threads=config.worker_concurrency,
            worker_processes=config.worker_processes,
        )
        if not redis_is_reachable(config.redis_url):
            argv = private_redis_argv(config.redis_url, config.data_dir)
            if argv is None:
                raise CommandError(
                    f"Redis does not answer at {config.redis_url} and no local redis-server can be started. "
                    "Start Redis or set REDIS_URL."
                )
            self.stdout.write(
                f"Redis does not answer; starting a private redis-server under {config.data_dir / 'redis'}."
            )
            specs.insert(0, ProcessSpec("redis", argv))
        if installation_get_verified() is None:
            self.stdout.write(
                "No owner yet. Create one in another terminal with:\n"
                "  .venv/bin/python manage.py createowner --username YOUR_NAME"
            )
        stack = Stack(specs=specs, env=os.environ, log_dir=config.data_dir / "logs", cwd=BASE_DIR, echo=sys.stdout)
        stopping = False

        def request_stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        if specs[0].name == "redis":
            stack.start(only="redis")
            if not wait_for_redis(config.redis_url, stack.processes["redis"]):
                stack.stop()
                raise CommandError("The private redis-server did not start; see its log under the data dir.")
        for spec in specs:
            if spec.name != "redis":
                stack.start(only=spec.name)
        self.stdout.write(f"Flarebot is starting at {config.origin} (Ctrl-C stops everything).")
        try:
            while not stopping:
                dead = stack.exited()
                if dead is not None:
                    self.stderr.write(f"{dead} exited; stopping the others.")
                    break
                time.sleep(0.2)
        finally:
            stack.stop()
        if not stopping:
            raise CommandError("A Flarebot process stopped unexpectedly.")
