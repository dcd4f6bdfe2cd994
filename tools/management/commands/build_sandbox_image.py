"""`python manage.py build_sandbox_image`: build the shell tool's sandbox image on the engine."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tools.shell.engine import SANDBOX_IMAGE
from tools.shell.image import (
    BuildFailed,
    sandbox_image_build,
    sandbox_image_check,
    sandbox_image_describe,
    sandbox_image_exists,
)


class Command(BaseCommand):
    help = f"Build {SANDBOX_IMAGE} on the Docker engine at DOCKER_HOST (or the local socket)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--force", action="store_true", help="build again even if the image exists")
        parser.add_argument(
            "--method",
            choices=("auto", "dockerfile", "debootstrap"),
            default="auto",
            help="auto: the Dockerfile when a registry answers, else debootstrap",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if sandbox_image_exists() and not options["force"]:
                self.stdout.write(f"{SANDBOX_IMAGE} is already there (--force builds it again).")
                return
            how = sandbox_image_build(say=lambda line: self.stdout.write(line), method=options["method"])
            self.stdout.write(f"built {SANDBOX_IMAGE} ({how}): {sandbox_image_describe()}")
            self.stdout.write(sandbox_image_check())
        except BuildFailed as failed:
            raise CommandError(str(failed)) from None
