"""A password hasher for the test process whose hashes the live stack can still check."""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class FastPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """Django's PBKDF2-SHA256 at one iteration.

    The hash names its iteration count, so the live stack's processes (which run the real
    settings and hashers) verify the owner's password made here, and upgrade it to full
    strength on the first sign-in. An MD5 hash would be refused there.
    """

    iterations = 1
