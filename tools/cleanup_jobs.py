"""Sending a lease's cleanup job by its name.

The tool modules ask for their leases' cleanup here instead of importing `tools.jobs`,
which imports them (the jobs run the tools' lease code): no import cycle, lazy or not.
"""

from __future__ import annotations

import logging
import uuid

from celery import current_app

logger = logging.getLogger(__name__)

BROWSER_LEASE_CLEANUP = "tools.jobs.browser_lease_cleanup"
SHELL_LEASE_CLEANUP = "tools.jobs.shell_lease_cleanup"


def lease_cleanup_enqueue(job: str, lease_id: uuid.UUID | str, *, countdown: float) -> None:
    """Send `job` for one lease after `countdown` seconds; never raises (the sweep retries)."""
    try:
        current_app.send_task(job, args=(str(lease_id),), countdown=countdown)
    except Exception:
        logger.warning("could not enqueue %s for lease %s; the sweep retries it", job, lease_id)
