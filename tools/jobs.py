"""Celery jobs of the tools app: browser and shell lease cleanup and reconciliation (queue `tools`)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown

from tools.cleanup_jobs import BROWSER_LEASE_CLEANUP, SHELL_LEASE_CLEANUP
from tools.models import BrowserLeaseState
from tools.shell.leases import shell_lease_settle, shell_leases_reconcile
from tools.web import leases
from tools.web.browser import CLOSE_TIMEOUT, browser_pools, chromium_path

logger = logging.getLogger(__name__)


@shared_task(name=BROWSER_LEASE_CLEANUP)
def browser_lease_cleanup(lease_id: str) -> None:
    """Try once more to close a browser lease's context; retried 5 s later while attempts remain."""
    state = leases.browser_lease_cleanup_run(lease_id=uuid.UUID(lease_id), wait=CLOSE_TIMEOUT)
    if state == BrowserLeaseState.OPEN:
        browser_lease_cleanup.apply_async(args=(lease_id,), countdown=CLOSE_TIMEOUT)
    elif state == BrowserLeaseState.CLEANUP_FAILED:
        logger.error("browser lease %s could not be closed after %d attempts", lease_id, leases.CLEANUP_ATTEMPTS)


@shared_task(name="tools.jobs.browser_leases_sweep")
def browser_leases_sweep() -> None:
    """Settle leases of gone processes and retry the cleanup of leases past their expiry."""
    leases.browser_leases_reconcile()
    for lease_id in leases.browser_leases_expired():
        browser_lease_cleanup.delay(str(lease_id))


# Seconds between retries of a shell container's removal: 5, 10, 20, 40, then every 60.
SHELL_RETRY_FIRST = 5.0
SHELL_RETRY_MAX = 60.0


@shared_task(name=SHELL_LEASE_CLEANUP)
def shell_lease_cleanup(lease_id: str, attempt: int = 1) -> None:
    """Try once more to remove a shell lease's container; retried with backoff until it is gone.

    It never gives up: the lease keeps its place under the limit until removal is
    confirmed (an engine that is down for long makes the shell busy, never unbounded).
    """
    if shell_lease_settle(lease_id=uuid.UUID(lease_id)):
        return
    countdown = min(SHELL_RETRY_MAX, SHELL_RETRY_FIRST * 2 ** min(attempt, 4))
    shell_lease_cleanup.apply_async(args=(lease_id, attempt + 1), countdown=countdown)


@shared_task(name="tools.jobs.shell_leases_sweep")
def shell_leases_sweep() -> None:
    """Remove the containers of gone processes, expired or pending leases, and unexplained ones."""
    shell_leases_reconcile()


@worker_ready.connect
def _shells_on_start(**kwargs: Any) -> None:
    try:
        shell_leases_reconcile()
    except Exception:
        logger.exception("could not reconcile shell leases at start; the sweep retries")


@worker_ready.connect
def _browsers_on_start(**kwargs: Any) -> None:
    path = chromium_path(refresh=True)
    logger.info("browser_read uses %s", path or "no browser: it is unavailable until one is installed")
    try:
        leases.browser_leases_reconcile()
    except Exception:
        logger.exception("could not reconcile browser leases at start; the sweep retries")


@worker_shutdown.connect
def _browsers_on_stop(**kwargs: Any) -> None:
    for pool in browser_pools():
        if pool.loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(pool.shutdown(), pool.loop).result(10)
            except Exception:
                logger.warning("browsers did not close at shutdown; they end with the process", exc_info=True)
