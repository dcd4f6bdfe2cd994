"""A task's checkpoint of browser state: the cookies of signed-in sites, sealed like provider keys.

A restore opens it in a new context; one that no longer opens (another server secret)
restores without it.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from django.conf import settings

from conversations.models import BrowserTask
from flarebot.core.crypto import DecryptionFailed, seal, unseal
from flarebot.core.installation import installation_get_verified

logger = logging.getLogger(__name__)


def storage_seal(state: dict[str, Any]) -> bytes:
    """Seal a context's storage state (cookies of signed-in sites) like provider keys."""
    installation = installation_get_verified()
    if installation is None:
        raise DecryptionFailed("no installation")
    return seal(json.dumps(state), server_secret=settings.SECRET_KEY, installation_id=installation.installation_id)


def browser_task_storage_state(*, task_id: uuid.UUID) -> dict[str, Any] | None:
    """Return a task's checkpointed storage state, or None (none stored, or it no longer opens)."""
    sealed = BrowserTask.objects.filter(id=task_id).values_list("storage_sealed", flat=True).first()
    installation = installation_get_verified()
    if sealed is None or installation is None:
        return None
    try:
        opened = unseal(bytes(sealed), server_secret=settings.SECRET_KEY, installation_id=installation.installation_id)
        value = json.loads(opened.reveal())
    except (DecryptionFailed, ValueError):
        logger.warning("browser task %s: its stored browser state no longer opens; restoring without it", task_id)
        return None
    return value if isinstance(value, dict) else None
