"""A stored key that no longer opens (the server secret changed) is `unreadable` everywhere.

Settings' API, the System section, a turn on its model and the tools that need it all say the
same thing: the key can no longer be read, enter it again. Entering it again clears it.
"""

from __future__ import annotations

import pytest

from conversations.model_settings import (
    key_unreadable_message,
    model_settings_get,
    provider_key_read,
    provider_key_set,
    turn_model_snapshot,
)
from tools.registry import KeyMissing

pytestmark = pytest.mark.django_db

OPENAI_KEY = "sk-proj-Ur4Kp8Wn2Qs6Tv0Yx3Za5Bc7"
ANTHROPIC_KEY = "sk-ant-api03-Hj5Kl7Mn9Pq1Rs3Tu5Vw7Xy"


@pytest.fixture
def rotated(owner, settings):
    """Both keys saved, then the server secret changed under them."""
    provider_key_set(provider="openai", key=OPENAI_KEY)
    provider_key_set(provider="anthropic", key=ANTHROPIC_KEY)
    settings.SECRET_KEY = settings.SECRET_KEY + "-rotated"
    return settings


def test_settings_say_unreadable_instead_of_verified(rotated):
    view = model_settings_get()

    assert view["credentials"] == {"anthropic": "configured", "openai": "configured"}
    assert view["verification"] == {"anthropic": "unreadable", "openai": "unreadable"}
    assert view["unchecked_reasons"] == {"anthropic": None, "openai": None}


def test_the_settings_api_says_unreadable(rotated, owner_client):
    body = owner_client.get("/api/settings/model/").json()

    assert body["verification"]["openai"] == "unreadable"
    assert OPENAI_KEY not in str(body)


def test_the_system_section_shows_an_error_that_asks_for_the_key_again(rotated, owner_client):
    response = owner_client.get("/api/system/")
    found = {c["name"]: c for c in response.json()["components"]}

    assert found["openai_key"]["state"] == "error"
    assert found["openai_key"]["detail"] == key_unreadable_message("openai")
    assert found["openai_key"]["fix"] == "Enter it again in Settings, under Model."
    assert OPENAI_KEY not in response.content.decode()


def test_a_tool_is_told_the_key_is_unreadable_not_missing(rotated):
    read = provider_key_read(provider="openai")

    assert read == KeyMissing("unreadable", key_unreadable_message("openai"))


def test_a_tool_is_told_a_key_is_missing_when_none_is_stored(owner):
    read = provider_key_read(provider="openai")

    assert isinstance(read, KeyMissing)
    assert read.state == "missing"


def test_a_turn_says_the_same_sentence(rotated):
    code, message = turn_model_snapshot().problem

    assert (code, message) == ("provider_key_unreadable", key_unreadable_message("anthropic"))
    assert message.endswith("enter it again in Settings.")


def test_entering_the_key_again_makes_it_verified(rotated, fake_providers):
    provider_key_set(provider="openai", key=OPENAI_KEY)

    assert model_settings_get()["verification"]["openai"] == "verified"
    assert model_settings_get()["verification"]["anthropic"] == "unreadable"
