"""`python manage.py createowner --username NAME`: make the one owner of this Flarebot."""

from __future__ import annotations

import getpass
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from flarebot.core.errors import FlarebotError
from flarebot.core.installation import owner_create


class Command(BaseCommand):
    help = "Create Flarebot's owner (exactly one). Password from FLAREBOT_OWNER_PASSWORD or a prompt."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        password = os.environ.get("FLAREBOT_OWNER_PASSWORD")
        if password is None:
            if not self.stdin_is_interactive():
                raise CommandError("Set FLAREBOT_OWNER_PASSWORD or run createowner in a terminal.")
            password = getpass.getpass("Owner password: ")
            if getpass.getpass("Owner password (again): ") != password:
                raise CommandError("The two passwords differ; nothing was created.")
        try:
            installation = owner_create(username=options["username"], password=password)
        except FlarebotError as error:
            raise CommandError(error.message) from None
        self.stdout.write(f"Owner {installation.owner_username!r} created; sign in at /login/.")

    def stdin_is_interactive(self) -> bool:
        return os.isatty(0)
