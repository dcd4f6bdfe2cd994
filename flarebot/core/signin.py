"""The sign-in throttle: attempts per client and account, and per client overall.

Every attempt is reserved, as a row, before its password is checked: counting the
client's recent rows and adding the reservation happen in one transaction that holds a
lock per client, so however many attempts arrive at once, no more than the limits allow
are ever checked in a window. A sign-in that succeeds forgets its client's rows for that
account; a failed one leaves its reservation standing as the failure. Rows are in the
database so every web replica sees the same count. The message never says whether the
account exists.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.contrib.auth import authenticate
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from flarebot.core.clients import client_address
from flarebot.core.errors import LimitReached
from flarebot.core.installation import user_is_owner
from flarebot.core.models import Installation, SignInFailure
from flarebot.core.rows import transaction_lock
from flarebot.core.sessions import owner_session_start

# An IPv6 client usually holds a whole /64: counting its addresses one by one would let
# it rotate through them.
IPV6_CLIENT_PREFIX = 64


def _account_key(username: str) -> str:
    return username.strip().casefold()[:150]


def client_key(address: str) -> str:
    """The throttle's key for a client: its address, or its /64 for IPv6."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address[:64]
    if isinstance(parsed, ipaddress.IPv6Address):
        return str(ipaddress.ip_network(f"{parsed}/{IPV6_CLIENT_PREFIX}", strict=False))
    return str(parsed)


def signin_attempt_reserve(*, client: str, username: str) -> bool:
    """Count one sign-in attempt against the limits, unless they are reached; return whether it may go on."""
    window = settings.FLAREBOT_SIGNIN_FAILURE_WINDOW
    account = _account_key(username)
    with transaction.atomic():
        transaction_lock(f"signin:{client}")
        recent = SignInFailure.objects.filter(client=client, created_at__gt=timezone.now() - window)
        allowed = (
            recent.count() < settings.FLAREBOT_SIGNIN_FAILURES_PER_CLIENT
            and recent.filter(account=account).count() < settings.FLAREBOT_SIGNIN_FAILURES_PER_ACCOUNT
        )
        if allowed:
            SignInFailure.objects.create(client=client, account=account)
    # Outside the lock: every client's attempts purge, and need not wait for each other.
    SignInFailure.objects.filter(created_at__lte=timezone.now() - window).delete()
    return allowed


def signin_failures_clear(*, client: str, username: str) -> None:
    """Forget this client's attempts on an account it just signed in to."""
    SignInFailure.objects.filter(client=client, account=_account_key(username)).delete()


def owner_signin(*, request: HttpRequest, installation: Installation, username: str, password: str) -> bool:
    """Sign the owner in if the credentials are the owner's; throttle attempts and keep failures.

    A wrong password, an unknown account and another user's valid credentials all look
    the same to the caller, and all count as failures.
    """
    client = client_key(client_address(request))
    if not signin_attempt_reserve(client=client, username=username):
        raise LimitReached("Too many failed sign-ins. Wait 15 minutes and try again.", code="signin_throttled")
    user = authenticate(request, username=username, password=password)
    if user is None or not user_is_owner(user=user, installation=installation):
        return False
    signin_failures_clear(client=client, username=username)
    owner_session_start(request=request, installation=installation, user=user)
    return True
