"""Services and selectors for the installation row: who owns this Flarebot."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from flarebot.core.errors import Conflict, InvalidInput
from flarebot.core.models import Installation


def installation_get_verified() -> Installation | None:
    """Return the installation if it is intact and matches its owner, else None."""
    return installation_verified(list(Installation.objects.select_related("owner")[:2]))


def installation_verified(rows: list[Installation]) -> Installation | None:
    """The one installation among `rows` (read with their owners, at most two) if it is intact, else None."""
    if len(rows) != 1:
        return None
    installation = rows[0]
    owner = installation.owner
    if not installation_intact(
        schema_version=installation.schema_version,
        username_then=installation.owner_username,
        username_now=owner.get_username(),
        owner_active=owner.is_active,
    ):
        return None
    return installation


def installation_intact(*, schema_version: int, username_then: str, username_now: str, owner_active: bool) -> bool:
    """An installation of this schema whose owner is active and still the same account."""
    return schema_version == settings.FLAREBOT_SCHEMA_VERSION and owner_active and username_now == username_then


def owner_create(*, username: str, password: str) -> Installation:
    """Create the one owner account and the installation row, or refuse a second owner."""
    username = username.strip()
    if not username or len(username) > 150:
        raise InvalidInput("The username must be 1-150 characters.")
    user_model = get_user_model()
    candidate = user_model(username=username)
    try:
        validate_password(password, user=candidate)
    except ValidationError as error:
        raise InvalidInput(" ".join(error.messages)) from None
    try:
        with transaction.atomic():
            if Installation.objects.exists():
                raise Conflict("Flarebot already has an owner; there can be only one.", code="owner_exists")
            if user_model.objects.filter(username=username).exists():
                raise Conflict("A user with that username already exists.", code="username_taken")
            user = user_model.objects.create_user(
                username=username, password=password, is_staff=True, is_superuser=True
            )
            return Installation.objects.create(
                schema_version=settings.FLAREBOT_SCHEMA_VERSION,
                owner=user,
                owner_username=username,
            )
    except IntegrityError:
        # Two createowner runs raced; the constraint let exactly one win.
        raise Conflict("Flarebot already has an owner; there can be only one.", code="owner_exists") from None


def user_is_owner(*, user: AbstractBaseUser | None, installation: Installation) -> bool:
    """Return whether this user is the installation's owner."""
    return bool(user is not None and user.is_authenticated and user.pk == installation.owner_id)
