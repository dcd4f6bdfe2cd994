"""Services and selectors for the installation row: who owns this Flarebot."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from flarebot.core.errors import Conflict, InvalidInput
from flarebot.core.models import Installation
from flarebot.core.rows import column, from_db, table


def installation_get_verified() -> Installation | None:
    """Return the installation if it is intact and matches its owner, else None."""
    rows = list(Installation.objects.select_related("owner")[:2])
    if len(rows) != 1:
        return None
    installation = rows[0]
    owner = installation.owner
    if not _intact(installation.schema_version, installation.owner_username, owner.get_username(), owner.is_active):
        return None
    return installation


def installation_id_verified() -> uuid.UUID | None:
    """Return the installation id if the installation is intact, else None (one plain query).

    The same check as installation_get_verified, for a turn's start, which reads it for
    every turn and needs nothing else of the row.
    """
    user, it = get_user_model(), Installation
    sql = (
        f"SELECT i.{column(it, 'installation_id')}, i.{column(it, 'schema_version')},"  # noqa: S608
        f" i.{column(it, 'owner_username')}, u.{column(user, user.USERNAME_FIELD)}, u.{column(user, 'is_active')}"
        f" FROM {table(it)} i JOIN {table(user)} u ON u.{column(user, 'id')} = i.{column(it, 'owner')} LIMIT 2"
    )
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(sql)
        rows = cursor.fetchall()
    if len(rows) != 1:
        return None
    installation_id, schema_version, username_then, username_now, active = rows[0]
    if not _intact(schema_version, username_then, username_now, bool(active)):
        return None
    return from_db(Installation, "installation_id", installation_id)


def _intact(schema_version: int, username_then: str, username_now: str, owner_active: bool) -> bool:
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
            user = user_model.objects.create_user(username=username, password=password)
            user.is_staff = True
            user.is_superuser = True
            user.save(update_fields=["is_staff", "is_superuser"])
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
