"""The one-time setup link: the first owner is created in the browser.

Until an owner exists, `make run` (runstack) issues a token of 128 random bits, writes it
to `<data dir>/setup_token` (0600) and prints the link `/setup/?token=...` on its screen;
the token is written nowhere else (no log, no event, no response). The web process reads
the file on every request to /setup/, so the link works in whichever process serves it,
and the token dies when an owner is created (by the page or by `createowner`) and when
that run stops. A request with a wrong token counts against the sign-in throttle, as a
wrong password does.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from django.conf import settings
from django.http import HttpRequest

from flarebot.core.clients import client_address
from flarebot.core.errors import LimitReached
from flarebot.core.installation import owner_create
from flarebot.core.models import Installation
from flarebot.core.sessions import owner_session_start
from flarebot.core.signin import client_key, signin_attempt_reserve, signin_failures_clear

TOKEN_FILE = "setup_token"
TOKEN_BYTES = 16  # 128 random bits
# The throttle's account name for setup attempts: no username can be this (it has a space).
SETUP_ACCOUNT = "(setup link)"
SETUP_PATH = "/setup/"


def setup_token_path(data_dir: Path) -> Path:
    return data_dir / TOKEN_FILE


def setup_token_issue(*, data_dir: Path) -> str:
    """Write a fresh token to the data dir (owner-only, replacing any older one) and return it."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    target = setup_token_path(data_dir)
    scratch = data_dir / f".{TOKEN_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(token)
    os.replace(scratch, target)
    return token


def setup_token_revoke(*, data_dir: Path) -> None:
    """Kill the token: the link answers 404 from now on."""
    with contextlib.suppress(FileNotFoundError):
        setup_token_path(data_dir).unlink()


def setup_token_valid(token: str) -> bool:
    """Whether `token` is the live token and no owner exists yet."""
    try:
        live = setup_token_path(settings.FLAREBOT_DATA_DIR).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return False
    if len(live) < TOKEN_BYTES or Installation.objects.exists():
        return False
    return secrets.compare_digest(live.encode(), token.encode("utf-8", "replace"))


def setup_attempt(*, request: HttpRequest, token: str) -> bool:
    """Check a token from the link as a sign-in attempt: throttled, and a wrong one counts as a failure."""
    if Installation.objects.exists():
        return False
    client = client_key(client_address(request))
    if not signin_attempt_reserve(client=client, username=SETUP_ACCOUNT):
        raise LimitReached("Too many failed attempts. Wait 15 minutes and try again.", code="signin_throttled")
    if not setup_token_valid(token):
        return False
    signin_failures_clear(client=client, username=SETUP_ACCOUNT)
    return True


def owner_setup(*, request: HttpRequest, username: str, password: str) -> Installation:
    """Create the owner from the setup page, kill the token and sign the new owner in."""
    installation = owner_create(username=username, password=password)
    setup_token_revoke(data_dir=settings.FLAREBOT_DATA_DIR)
    owner_session_start(request=request, installation=installation, user=installation.owner)
    return installation
