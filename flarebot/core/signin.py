"""The sign-in throttle: failures per client and account, and per client overall.

Failures are rows in the database so every web replica sees the same count. The
message never says whether the account exists.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import authenticate
from django.db.models import Q
from django.http import HttpRequest
from django.utils import timezone

from flarebot.core.errors import LimitReached
from flarebot.core.installation import user_is_owner
from flarebot.core.models import Installation, SignInFailure
from flarebot.core.sessions import owner_session_start


def _account_key(username: str) -> str:
    return username.strip().casefold()[:150]


def signin_is_throttled(*, client: str, username: str) -> bool:
    """Return whether this client may not try to sign in to this account now."""
    since = timezone.now() - settings.FLAREBOT_SIGNIN_FAILURE_WINDOW
    recent = SignInFailure.objects.filter(client=client, created_at__gt=since)
    if recent.count() >= settings.FLAREBOT_SIGNIN_FAILURES_PER_CLIENT:
        return True
    return recent.filter(account=_account_key(username)).count() >= settings.FLAREBOT_SIGNIN_FAILURES_PER_ACCOUNT


def signin_failure_record(*, client: str, username: str) -> None:
    """Remember one failed sign-in and forget the ones outside the window."""
    now = timezone.now()
    SignInFailure.objects.create(client=client, account=_account_key(username))
    SignInFailure.objects.filter(created_at__lte=now - settings.FLAREBOT_SIGNIN_FAILURE_WINDOW).delete()


def signin_failures_clear(*, client: str, username: str) -> None:
    """Forget this client's failures for an account it just signed in to."""
    SignInFailure.objects.filter(Q(client=client) & Q(account=_account_key(username))).delete()


def owner_signin(*, request: HttpRequest, installation: Installation, username: str, password: str) -> bool:
    """Sign the owner in if the credentials are the owner's; throttle and record failures.

    A wrong password, an unknown account and another user's valid credentials all look
    the same to the caller, and all count as failures.
    """
    client = (request.META.get("REMOTE_ADDR") or "unknown")[:64]
    if signin_is_throttled(client=client, username=username):
        raise LimitReached("Too many failed sign-ins. Wait 15 minutes and try again.", code="signin_throttled")
    user = authenticate(request, username=username, password=password)
    if user is None or not user_is_owner(user=user, installation=installation):
        signin_failure_record(client=client, username=username)
        return False
    signin_failures_clear(client=client, username=username)
    owner_session_start(request=request, installation=installation, user=user)
    return True
