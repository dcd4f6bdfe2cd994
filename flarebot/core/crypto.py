"""Encryption of provider keys at rest: AES-256-GCM under a key derived from the server secret.

The key is derived with HKDF-SHA256 from the server secret, with the installation id as
salt; the installation id is also the associated data, so a ciphertext copied into
another installation does not decrypt. Every write uses a fresh 96-bit nonce. When the
server secret changes, decryption fails with DecryptionFailed and callers ask the owner
to enter the key again.
"""

from __future__ import annotations

import os
import uuid

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

NONCE_BYTES = 12
_INFO = b"flarebot provider keys v1"


class DecryptionFailed(Exception):
    """The ciphertext does not open under the current server secret and installation."""


class Secret:
    """A string that does not show itself in reprs, logs or exception messages."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """Return the secret, for the one call that needs it (a provider client)."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __reduce__(self) -> str:
        raise TypeError("a Secret is never serialized")


def _key(server_secret: str, installation_id: uuid.UUID) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=installation_id.bytes, info=_INFO).derive(
        server_secret.encode("utf-8")
    )


def seal(plaintext: str, *, server_secret: str, installation_id: uuid.UUID) -> bytes:
    """Encrypt plaintext; return nonce followed by ciphertext and tag."""
    nonce = os.urandom(NONCE_BYTES)
    aead = AESGCM(_key(server_secret, installation_id))
    return nonce + aead.encrypt(nonce, plaintext.encode("utf-8"), installation_id.bytes)


def unseal(sealed: bytes, *, server_secret: str, installation_id: uuid.UUID) -> Secret:
    """Decrypt what seal() wrote, or raise DecryptionFailed."""
    if len(sealed) <= NONCE_BYTES:
        raise DecryptionFailed("ciphertext too short")
    aead = AESGCM(_key(server_secret, installation_id))
    try:
        plaintext = aead.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], installation_id.bytes)
    except InvalidTag:
        raise DecryptionFailed("ciphertext does not open") from None
    return Secret(plaintext.decode("utf-8"))
