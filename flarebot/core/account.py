"""The owner's account: changing the password from Settings.

The current password is checked as a sign-in is (each attempt counted first, under the
sign-in throttle), so the form cannot be used to guess it. A new password passes Django's
validators. Changing it keeps the session that changed it and ends every other one: their
stored auth hash no longer matches, and their sockets close with 4001
(`flarebot.core.sessions` re-checks them on the owner row's change).
"""

from __future__ import annotations

from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from flarebot.core.clients import client_address
from flarebot.core.errors import InvalidInput, LimitReached
from flarebot.core.signin import client_key, signin_attempt_reserve, signin_failures_clear


def owner_password_change(*, request: HttpRequest, user: User, current: str, new: str) -> None:
    """Replace the owner's password, if `current` is it; this session stays signed in, every other ends."""
    client, account = client_key(client_address(request)), user.get_username()
    if not signin_attempt_reserve(client=client, username=account):
        raise LimitReached("Too many wrong passwords. Wait 15 minutes and try again.", code="signin_throttled")
    if not user.check_password(current):
        raise InvalidInput("The current password is not right.", code="wrong_password")
    signin_failures_clear(client=client, username=account)
    if new == current:
        raise InvalidInput("The new password is the current one; choose another.", code="invalid_password")
    try:
        validate_password(new, user=user)
    except ValidationError as error:
        raise InvalidInput(" ".join(error.messages), code="invalid_password") from None
    user.set_password(new)
    user.save(update_fields=["password"])
    update_session_auth_hash(request, user)
