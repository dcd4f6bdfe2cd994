#!/usr/bin/env python
"""Django's command-line utility for Flarebot."""

import os
import sys

# Commands that work on an installation `make run` set up: refused before Django loads its
# settings, which would create a data dir and a secret where none was.
NEEDS_INSTALLATION = {"createowner"}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flarebot.settings")
    if len(sys.argv) > 1 and sys.argv[1] in NEEDS_INSTALLATION:
        from flarebot.core.env import ConfigurationError, installation_absent, load_config, no_installation_message

        try:
            config = load_config()
        except ConfigurationError as error:
            sys.exit(f"Configuration error: {error}")
        reason = installation_absent(config)
        if reason is not None:
            sys.exit(no_installation_message(config.data_dir, reason))
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
