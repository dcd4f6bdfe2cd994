"""`.venv/bin/python manage.py createowner --username NAME`: make the one owner of this Flarebot.

It works on the installation `make run` set up (the same FLAREBOT_DATA_DIR and
DATABASE_URL); manage.py refuses before Django starts when there is none, and this
command refuses a database without Flarebot's tables, so it never creates a second data
dir or database by mistake.
"""

from __future__ import annotations

import getpass
import os
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from flarebot.core.env import no_installation_message
from flarebot.core.errors import FlarebotError
from flarebot.core.installation import owner_create
from flarebot.core.models import Installation
from flarebot.core.setup_link import setup_token_revoke


class Command(BaseCommand):
    help = "Create Flarebot's owner (exactly one). Password from FLAREBOT_OWNER_PASSWORD or a prompt."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        data_dir = settings.FLAREBOT_DATA_DIR
        if Installation._meta.db_table not in connection.introspection.table_names():
            raise CommandError(no_installation_message(data_dir, "its database has no Flarebot tables"))
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
        setup_token_revoke(data_dir=data_dir)
        self.stdout.write(
            f"Owner {installation.owner_username!r} created in the data dir {data_dir}; "
            f"sign in at {settings.FLAREBOT_ORIGIN}/login/."
        )

    def stdin_is_interactive(self) -> bool:
        return os.isatty(0)
