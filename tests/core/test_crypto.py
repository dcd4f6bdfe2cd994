"""Provider keys at rest: AES-256-GCM under a key bound to the server secret and installation."""

from __future__ import annotations

import pickle
import uuid

import pytest

from flarebot.core.crypto import NONCE_BYTES, DecryptionFailed, Secret, seal, unseal

SERVER_SECRET = "server-secret-for-the-crypto-tests-0123456789"
INSTALLATION = uuid.UUID("6f1c2a4e-8d3b-4f6a-9c1e-2b7d5e0a9f13")
KEY = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"


def sealed_key(plaintext: str = KEY) -> bytes:
    return seal(plaintext, server_secret=SERVER_SECRET, installation_id=INSTALLATION)


def test_it_opens_what_it_sealed():
    sealed = sealed_key()

    opened = unseal(sealed, server_secret=SERVER_SECRET, installation_id=INSTALLATION)

    assert isinstance(opened, Secret)
    assert opened.reveal() == KEY
    assert KEY.encode() not in sealed


def test_it_round_trips_non_ascii_text():
    opened = unseal(sealed_key("clé-été-🔑-0123456789"), server_secret=SERVER_SECRET, installation_id=INSTALLATION)

    assert opened.reveal() == "clé-été-🔑-0123456789"


def test_it_uses_a_fresh_nonce_for_every_write():
    first, second = sealed_key(), sealed_key()

    assert first != second
    assert first[:NONCE_BYTES] != second[:NONCE_BYTES]
    assert NONCE_BYTES == 12  # 96 bits
    # nonce + ciphertext (same length as the UTF-8 plaintext) + 16-byte tag
    assert len(first) == NONCE_BYTES + len(KEY.encode()) + 16
    for sealed in (first, second):
        assert unseal(sealed, server_secret=SERVER_SECRET, installation_id=INSTALLATION).reveal() == KEY


def test_it_refuses_to_open_under_another_server_secret():
    with pytest.raises(DecryptionFailed):
        unseal(sealed_key(), server_secret=SERVER_SECRET + "-rotated", installation_id=INSTALLATION)


def test_it_refuses_to_open_for_another_installation():
    with pytest.raises(DecryptionFailed):
        unseal(sealed_key(), server_secret=SERVER_SECRET, installation_id=uuid.uuid4())


@pytest.mark.parametrize("position", [0, NONCE_BYTES, NONCE_BYTES + 5, -1])
def test_it_refuses_a_tampered_ciphertext(position):
    sealed = bytearray(sealed_key())
    sealed[position] ^= 0x01

    with pytest.raises(DecryptionFailed):
        unseal(bytes(sealed), server_secret=SERVER_SECRET, installation_id=INSTALLATION)


@pytest.mark.parametrize("sealed", [b"", b"\x00" * NONCE_BYTES, b"\x00" * (NONCE_BYTES + 1)])
def test_it_refuses_a_truncated_ciphertext(sealed):
    with pytest.raises(DecryptionFailed):
        unseal(sealed, server_secret=SERVER_SECRET, installation_id=INSTALLATION)


def test_it_refuses_a_ciphertext_cut_short():
    with pytest.raises(DecryptionFailed):
        unseal(sealed_key()[:-1], server_secret=SERVER_SECRET, installation_id=INSTALLATION)


def test_it_never_shows_a_secret_as_text():
    secret = Secret(KEY)

    shown = [repr(secret), str(secret), f"{secret}", f"{secret!r}", format(secret), repr([secret]), str({"k": secret})]

    for text in shown:
        assert KEY not in text
        assert "********" in text


def test_it_keeps_the_secret_out_of_exception_messages():
    secret = Secret(KEY)

    error = ValueError("could not use", secret)

    assert KEY not in str(error)
    assert KEY not in repr(error)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_it_refuses_to_pickle_a_secret(protocol):
    with pytest.raises(TypeError):
        pickle.dumps(Secret(KEY), protocol=protocol)
