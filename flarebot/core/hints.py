"""Commands that Flarebot's messages tell a person to run, spelled as the README's user runs them.

`make run` installs into `.venv/`, so a bare `python` is usually another interpreter,
without Flarebot's packages: every hint names `.venv/bin/python`, from the Flarebot folder.
"""

from __future__ import annotations

VENV_PYTHON = ".venv/bin/python"
MANAGE = f"{VENV_PYTHON} manage.py"
CREATE_OWNER_COMMAND = f"{MANAGE} createowner --username NAME"
BUILD_SANDBOX_IMAGE_COMMAND = f"{MANAGE} build_sandbox_image"
PLAYWRIGHT_INSTALL_COMMAND = f"{VENV_PYTHON} -m playwright install chromium"
