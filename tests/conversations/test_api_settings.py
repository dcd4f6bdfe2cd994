"""The settings API (model, provider keys, instructions), exactly as PROTOCOL.md describes it."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from django.conf import settings as django_settings
from django.test import Client

from conversations.instructions import DEFAULT_INSTRUCTIONS, PRODUCT_RULES
from conversations.models import InstructionOverride, ModelConfiguration, ProviderKey
from conversations.providers.catalog import ANTHROPIC_MODELS, OPENAI_MODELS
from flarebot.core.crypto import unseal
from tests.support.resources import free_port

MODEL = "/api/settings/model/"
CATALOG = "/api/settings/model/catalog/"
INSTRUCTIONS = "/api/settings/instructions/"
ISO_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
FOREIGN_ORIGIN = "https://attacker.example"

# Printable ASCII without the space: what a key may be made of.
KEY_ALPHABET = "".join(chr(c) for c in range(33, 127))
ANTHROPIC_KEY = "sk-ant-api03-Zq8vR2mK4xT7bN1cW9eY5uH3"
OPENAI_KEY = "sk-proj-Lm3Np5Qr7St9Uv1Wx3Yz5Ab7Cd9"


def key_url(provider: str) -> str:
    return f"/api/settings/provider-keys/{provider}/"


def put(client: Client, url: str, body: object, **kwargs):
    return client.put(url, json.dumps(body), content_type="application/json", **kwargs)


def assert_error(response, status: int, code: str | None = None) -> None:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code


def settings_view(
    provider: str, model: str, *, anthropic: str = "missing", openai: str = "missing", available: bool = True
) -> dict:
    """The settings as shown; a stored key was verified (the loopback providers take every key)."""
    return {
        "configuration": {"provider": provider, "model": model, "available": available},
        "credentials": {"anthropic": anthropic, "openai": openai},
        "verification": {
            name: "verified" if state == "configured" else None
            for name, state in (("anthropic", anthropic), ("openai", openai))
        },
        "unchecked_reasons": {"anthropic": None, "openai": None},
    }


@pytest.fixture(autouse=True)
def providers_answer(fake_providers):
    """Saving a key asks the provider: the loopback one answers (each test says which keys it refuses)."""
    return fake_providers


def stored_keys() -> dict[str, bytes]:
    return {row.provider: bytes(row.sealed) for row in ProviderKey.objects.all()}


def stored_configuration() -> list[tuple[str, str]]:
    return list(ModelConfiguration.objects.values_list("provider", "model"))


def stored_instructions() -> list[tuple]:
    return list(InstructionOverride.objects.values_list("text", "updated_at"))


def opened(sealed: bytes, owner) -> str:
    return unseal(sealed, server_secret=django_settings.SECRET_KEY, installation_id=owner.installation_id).reveal()


@pytest.fixture
def with_local_models(settings):
    settings.CONFIG = dataclasses.replace(
        settings.CONFIG, local_base_url="http://127.0.0.1:11434/v1", local_models=("llama3", "qwen3:8b")
    )
    return settings


# --- model settings -------------------------------------------------------------------


def test_it_shows_the_default_model_and_no_credentials(owner_client):
    response = owner_client.get(MODEL)

    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    assert response.json() == settings_view("anthropic", ANTHROPIC_MODELS[0])
    assert stored_configuration() == []


def test_it_lists_the_catalog(owner_client):
    response = owner_client.get(CATALOG)

    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    providers = response.json()["providers"]
    assert set(providers) == {"anthropic", "openai", "local"}
    assert providers["anthropic"] == list(ANTHROPIC_MODELS)
    assert providers["openai"] == list(OPENAI_MODELS)
    assert providers["local"] == []


def test_it_offers_and_defaults_to_the_operators_local_models(owner_client, with_local_models):
    catalog = owner_client.get(CATALOG).json()["providers"]
    current = owner_client.get(MODEL).json()

    assert catalog["local"] == ["llama3", "qwen3:8b"]
    assert catalog["anthropic"] == list(ANTHROPIC_MODELS)
    assert current == settings_view("local", "llama3")


def test_it_selects_a_local_model_when_the_operator_configured_one(owner_client, with_local_models):
    response = put(owner_client, MODEL, {"provider": "local", "model": "qwen3:8b"})

    assert response.status_code == 200, response.content
    assert response.json() == settings_view("local", "qwen3:8b")
    assert stored_configuration() == [("local", "qwen3:8b")]


def test_a_chosen_model_that_left_the_catalog_is_shown_unavailable_never_replaced(owner_client, settings):
    local = dataclasses.replace(settings.CONFIG, local_base_url="http://127.0.0.1:11434/v1", local_models=("llama3",))
    without_local = settings.CONFIG
    settings.CONFIG = local
    assert put(owner_client, MODEL, {"provider": "local", "model": "llama3"}).status_code == 200

    settings.CONFIG = without_local

    assert owner_client.get(MODEL).json() == settings_view("local", "llama3", available=False)
    assert stored_configuration() == [("local", "llama3")]


@pytest.mark.parametrize(
    ("provider", "model"),
    [("anthropic", m) for m in ANTHROPIC_MODELS] + [("openai", m) for m in OPENAI_MODELS],
)
def test_it_selects_any_model_in_the_catalog(owner_client, provider, model):
    response = put(owner_client, MODEL, {"provider": provider, "model": model})

    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    assert response.json() == settings_view(provider, model)
    assert owner_client.get(MODEL).json() == settings_view(provider, model)
    assert stored_configuration() == [(provider, model)]


def test_it_replaces_the_selection_instead_of_adding_one(owner_client):
    put(owner_client, MODEL, {"provider": "openai", "model": OPENAI_MODELS[1]})
    response = put(owner_client, MODEL, {"provider": "anthropic", "model": ANTHROPIC_MODELS[2]})

    assert response.json()["configuration"] == {
        "provider": "anthropic",
        "model": ANTHROPIC_MODELS[2],
        "available": True,
    }
    assert stored_configuration() == [("anthropic", ANTHROPIC_MODELS[2])]


@pytest.mark.parametrize(
    "body",
    [
        {"provider": "mistral", "model": "mistral-large-latest"},
        {"provider": "anthropic", "model": "claude-3-opus-20240229"},
        {"provider": "anthropic", "model": OPENAI_MODELS[0]},
        {"provider": "openai", "model": ANTHROPIC_MODELS[0]},
        {"provider": "local", "model": "llama3"},
        {"provider": "Anthropic", "model": ANTHROPIC_MODELS[0]},
        {"provider": "anthropic", "model": ANTHROPIC_MODELS[0].upper()},
        {"provider": "anthropic", "model": f" {ANTHROPIC_MODELS[0]}"},
        {"provider": "", "model": ""},
        {"provider": "anthropic", "model": ANTHROPIC_MODELS[0], "base_url": "https://evil.example/v1"},
        {"provider": "openai", "model": OPENAI_MODELS[0], "endpoint": "https://evil.example"},
        {"provider": "anthropic", "model": ANTHROPIC_MODELS[0], "key": ANTHROPIC_KEY},
        {"provider": ["anthropic"], "model": ANTHROPIC_MODELS[0]},
        {"provider": "anthropic", "model": 4},
        {"provider": None, "model": ANTHROPIC_MODELS[0]},
        {"provider": {"name": "anthropic"}, "model": ANTHROPIC_MODELS[0]},
        {"provider": "anthropic"},
        {"model": ANTHROPIC_MODELS[0]},
        {},
        [],
        ["anthropic", ANTHROPIC_MODELS[0]],
        "anthropic",
        None,
    ],
)
def test_it_refuses_a_model_outside_the_catalog_and_changes_nothing(owner_client, body):
    put(owner_client, MODEL, {"provider": "openai", "model": OPENAI_MODELS[1]})
    before = stored_configuration()

    response = put(owner_client, MODEL, body)

    assert_error(response, 400)
    assert response["Cache-Control"] == "no-store"
    assert stored_configuration() == before == [("openai", OPENAI_MODELS[1])]
    assert owner_client.get(MODEL).json() == settings_view("openai", OPENAI_MODELS[1])


def test_it_refuses_a_body_that_is_not_json(owner_client):
    response = owner_client.put(MODEL, "provider=anthropic", content_type="application/json")

    assert_error(response, 400)
    assert stored_configuration() == []


# --- provider keys --------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "a" * 20,
        "Z" * 512,
        (KEY_ALPHABET * 6)[:512],
        KEY_ALPHABET,
        ANTHROPIC_KEY,
    ],
)
def test_it_accepts_keys_of_20_to_512_printable_characters(owner_client, owner, key):
    response = put(owner_client, key_url("anthropic"), {"key": key})

    assert response.status_code == 200, response.content
    assert response.json() == settings_view("anthropic", ANTHROPIC_MODELS[0], anthropic="configured")
    assert opened(stored_keys()["anthropic"], owner) == key


@pytest.mark.parametrize(
    "key",
    [
        "a" * 19,
        "a" * 513,
        "",
        "sk-ant-api03 Zq8vR2mK4xT7bN1cW9eY5uH3",
        "sk-ant-api03\tZq8vR2mK4xT7bN1cW9eY5uH3",
        "sk-ant-api03-Zq8vR2mK4xT7bN1cW9eY5uH3\n",
        "sk-ant-api03-Zq8vR2mK4xT7bN1cW9eY5uH3\r",
        " sk-ant-api03-Zq8vR2mK4xT7bN1cW9eY5uH3",
        "sk-ant-api03-Zq8vR2mK4xT7bN1cW9eY5uH\u00e9",
        "sk-ant-api03-Zq8vR2mK4xT7bN1cW9eY5uH\u00a0",
        "sk-ant-api03-Zq8vR2mK4xT7bN1cW9eY5uH\u2003",
        "sk-ant-api03-Zq8vR2mK4xT7bN1cW9eY5uH\U0001f511",
        "sk-ant-api03-Zq8vR2mK4xT7bN1cW9eY5uH\x7f",
        "sk-ant-api03-Zq8vR2mK4xT7bN1cW9eY5uH\x00",
    ],
)
def test_it_refuses_a_malformed_key_and_keeps_the_stored_one(owner_client, owner, key):
    put(owner_client, key_url("anthropic"), {"key": ANTHROPIC_KEY})
    before = stored_keys()

    response = put(owner_client, key_url("anthropic"), {"key": key})

    assert_error(response, 400)
    if key.strip():
        assert key.strip() not in response.content.decode()
    assert stored_keys() == before
    assert opened(before["anthropic"], owner) == ANTHROPIC_KEY
    assert owner_client.get(MODEL).json()["credentials"]["anthropic"] == "configured"


@pytest.mark.parametrize(
    "body",
    [
        {"key": 12345678901234567890123},
        {"key": None},
        {"key": [ANTHROPIC_KEY]},
        {},
        {"key": ANTHROPIC_KEY, "provider": "anthropic"},
        {"api_key": ANTHROPIC_KEY},
        [ANTHROPIC_KEY],
        ANTHROPIC_KEY,
    ],
)
def test_it_refuses_a_malformed_key_body(owner_client, body):
    response = put(owner_client, key_url("openai"), body)

    assert_error(response, 400)
    assert stored_keys() == {}
    assert ANTHROPIC_KEY not in response.content.decode()


@pytest.mark.parametrize("provider", ["local", "mistral", "Anthropic", "openai-compatible"])
def test_it_refuses_a_key_for_a_provider_that_takes_none(owner_client, provider):
    response = put(owner_client, key_url(provider), {"key": ANTHROPIC_KEY})

    assert_error(response, 400)
    assert stored_keys() == {}
    assert ANTHROPIC_KEY not in response.content.decode()


@pytest.mark.parametrize("provider", ["local", "mistral"])
def test_it_refuses_to_delete_a_key_for_a_provider_that_takes_none(owner_client, provider):
    response = owner_client.delete(key_url(provider))

    assert_error(response, 400)


def test_it_stores_a_key_sealed_and_never_shows_it(owner_client, owner):
    response = put(owner_client, key_url("anthropic"), {"key": ANTHROPIC_KEY})

    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    assert response.json() == settings_view("anthropic", ANTHROPIC_MODELS[0], anthropic="configured")
    assert ANTHROPIC_KEY not in response.content.decode()

    row = ProviderKey.objects.get()
    assert row.provider == "anthropic"
    sealed = bytes(row.sealed)
    assert ANTHROPIC_KEY.encode() not in sealed
    assert ANTHROPIC_KEY[-12:].encode() not in sealed
    assert opened(sealed, owner) == ANTHROPIC_KEY

    shown = owner_client.get(MODEL)
    assert shown.json()["credentials"] == {"anthropic": "configured", "openai": "missing"}
    assert ANTHROPIC_KEY not in shown.content.decode()
    assert ANTHROPIC_KEY not in owner_client.get(CATALOG).content.decode()

    page = owner_client.get("/")
    assert page.status_code == 200
    assert ANTHROPIC_KEY not in page.content.decode()


def test_it_keeps_keys_per_provider(owner_client, owner):
    put(owner_client, key_url("anthropic"), {"key": ANTHROPIC_KEY})
    response = put(owner_client, key_url("openai"), {"key": OPENAI_KEY})

    assert response.json()["credentials"] == {"anthropic": "configured", "openai": "configured"}
    keys = stored_keys()
    assert {provider: opened(sealed, owner) for provider, sealed in keys.items()} == {
        "anthropic": ANTHROPIC_KEY,
        "openai": OPENAI_KEY,
    }


def test_it_replaces_a_key(owner_client, owner):
    put(owner_client, key_url("openai"), {"key": OPENAI_KEY})
    first = stored_keys()["openai"]
    replacement = "sk-proj-Replacement000000000000000000"

    response = put(owner_client, key_url("openai"), {"key": replacement})

    assert response.status_code == 200
    assert response.json()["credentials"]["openai"] == "configured"
    assert ProviderKey.objects.count() == 1
    second = stored_keys()["openai"]
    assert second != first
    assert opened(second, owner) == replacement


def test_it_seals_the_same_key_differently_each_time(owner_client, owner):
    put(owner_client, key_url("openai"), {"key": OPENAI_KEY})
    first = stored_keys()["openai"]

    put(owner_client, key_url("openai"), {"key": OPENAI_KEY})
    second = stored_keys()["openai"]

    assert first != second
    assert opened(first, owner) == opened(second, owner) == OPENAI_KEY


def test_it_deletes_a_key(owner_client):
    put(owner_client, key_url("anthropic"), {"key": ANTHROPIC_KEY})
    put(owner_client, key_url("openai"), {"key": OPENAI_KEY})

    response = owner_client.delete(key_url("anthropic"))

    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    assert response.json()["credentials"] == {"anthropic": "missing", "openai": "configured"}
    assert set(stored_keys()) == {"openai"}
    assert owner_client.get(MODEL).json()["credentials"] == {"anthropic": "missing", "openai": "configured"}


def test_it_deletes_an_absent_key_without_complaint(owner_client):
    response = owner_client.delete(key_url("openai"))

    assert response.status_code == 200
    assert response.json() == settings_view("anthropic", ANTHROPIC_MODELS[0])


def test_it_keeps_the_model_when_keys_change(owner_client):
    put(owner_client, MODEL, {"provider": "openai", "model": OPENAI_MODELS[2]})

    put(owner_client, key_url("openai"), {"key": OPENAI_KEY})
    response = owner_client.delete(key_url("openai"))

    assert response.json() == settings_view("openai", OPENAI_MODELS[2])


# --- instructions ---------------------------------------------------------------------


def test_it_shows_the_default_instructions(owner_client):
    response = owner_client.get(INSTRUCTIONS)

    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body == {
        "effective": DEFAULT_INSTRUCTIONS,
        "default": DEFAULT_INSTRUCTIONS,
        "customized": False,
        "modified_at": None,
        "rules": PRODUCT_RULES,
    }
    assert "Flarebot" in body["default"]


def test_it_keeps_custom_instructions_exactly_but_for_their_line_breaks(owner_client):
    sent = "  Answer in French.\tAlways.\nUse metric units.\r\nSign off with 🌞  \n\n"
    text = "  Answer in French.\tAlways.\nUse metric units.\nSign off with 🌞  \n\n"

    response = put(owner_client, INSTRUCTIONS, {"text": sent})

    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["effective"] == text
    assert body["default"] == DEFAULT_INSTRUCTIONS
    assert body["customized"] is True
    assert ISO_Z.match(body["modified_at"])
    assert InstructionOverride.objects.get().text == text
    assert owner_client.get(INSTRUCTIONS).json() == body


def test_it_replaces_custom_instructions(owner_client):
    put(owner_client, INSTRUCTIONS, {"text": "First version."})

    response = put(owner_client, INSTRUCTIONS, {"text": "Second version."})

    assert response.json()["effective"] == "Second version."
    assert [text for text, _ in stored_instructions()] == ["Second version."]


def test_it_keeps_custom_instructions_out_of_the_page(owner_client):
    text = "Secret preference: call me Captain Nemo-7731."
    put(owner_client, INSTRUCTIONS, {"text": text})

    page = owner_client.get("/")

    assert page.status_code == 200
    assert "Nemo-7731" not in page.content.decode()


@pytest.mark.parametrize(
    "text",
    ["a" * 16_000, "😀" * 8_000, "é" * 16_000, "a" * 15_998 + "😀", "line\r\n" * 2_666 + "abcd"],
)
def test_it_accepts_instructions_of_up_to_16000_utf16_units(owner_client, text):
    response = put(owner_client, INSTRUCTIONS, {"text": text})

    assert response.status_code == 200, response.content[:300]
    assert response.json()["effective"] == text.replace("\r\n", "\n")
    assert InstructionOverride.objects.get().text == text.replace("\r\n", "\n")


@pytest.mark.parametrize("text", ["a" * 16_001, "😀" * 8_000 + "a", "a" * 15_999 + "😀", "😀" * 8_001])
def test_it_refuses_instructions_longer_than_16000_utf16_units(owner_client, text):
    put(owner_client, INSTRUCTIONS, {"text": "Keep these."})
    before = stored_instructions()

    response = put(owner_client, INSTRUCTIONS, {"text": text})

    assert_error(response, 400)
    assert stored_instructions() == before
    assert owner_client.get(INSTRUCTIONS).json()["effective"] == "Keep these."


@pytest.mark.parametrize("control", ["\x00", "\x07", "\x08", "\x0b", "\x0c", "\x1b", "\x7f", "\x85", "\x9f"])
def test_it_refuses_control_characters_other_than_tabs_and_line_breaks(owner_client, control):
    put(owner_client, INSTRUCTIONS, {"text": "Keep these."})
    before = stored_instructions()

    response = put(owner_client, INSTRUCTIONS, {"text": f"Be brief.{control}Be kind."})

    assert_error(response, 400)
    assert stored_instructions() == before


@pytest.mark.parametrize("text", ["", " ", "\t", "\n", "\r\n", " \t\r\n  "])
def test_it_refuses_blank_instructions(owner_client, text):
    put(owner_client, INSTRUCTIONS, {"text": "Keep these."})
    before = stored_instructions()

    response = put(owner_client, INSTRUCTIONS, {"text": text})

    assert_error(response, 400)
    assert stored_instructions() == before
    assert owner_client.get(INSTRUCTIONS).json()["effective"] == "Keep these."


@pytest.mark.parametrize(
    "body",
    [
        {"text": 42},
        {"text": None},
        {"text": True},
        {"text": ["Be brief."]},
        {"text": {"value": "Be brief."}},
        {"text": "Be brief.", "customized": True},
        {"text": "Be brief.", "default": "Be brief."},
        {"effective": "Be brief."},
        {},
        ["Be brief."],
        "Be brief.",
    ],
)
def test_it_refuses_a_malformed_instructions_body(owner_client, body):
    put(owner_client, INSTRUCTIONS, {"text": "Keep these."})
    before = stored_instructions()

    response = put(owner_client, INSTRUCTIONS, body)

    assert_error(response, 400)
    assert stored_instructions() == before


def test_it_leaves_the_defaults_in_place_when_the_first_write_fails(owner_client):
    response = put(owner_client, INSTRUCTIONS, {"text": "   "})

    assert_error(response, 400)
    assert stored_instructions() == []
    assert owner_client.get(INSTRUCTIONS).json()["customized"] is False


def test_it_resets_instructions_to_the_defaults(owner_client):
    put(owner_client, INSTRUCTIONS, {"text": "Answer in French."})

    response = owner_client.delete(INSTRUCTIONS)

    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    expected = {
        "effective": DEFAULT_INSTRUCTIONS,
        "default": DEFAULT_INSTRUCTIONS,
        "customized": False,
        "modified_at": None,
        "rules": PRODUCT_RULES,
    }
    assert response.json() == expected
    assert stored_instructions() == []
    assert owner_client.get(INSTRUCTIONS).json() == expected


def test_it_resets_instructions_that_were_never_customized(owner_client):
    response = owner_client.delete(INSTRUCTIONS)

    assert response.status_code == 200
    assert response.json()["customized"] is False


def test_it_refuses_a_body_on_reset(owner_client):
    put(owner_client, INSTRUCTIONS, {"text": "Answer in French."})

    response = owner_client.delete(INSTRUCTIONS, json.dumps({"text": "x"}), content_type="application/json")

    assert_error(response, 400)
    assert [text for text, _ in stored_instructions()] == ["Answer in French."]


# --- who may use these ----------------------------------------------------------------

CALLS = [
    ("get", MODEL, None),
    ("get", CATALOG, None),
    ("put", MODEL, {"provider": "openai", "model": OPENAI_MODELS[0]}),
    ("put", key_url("anthropic"), {"key": ANTHROPIC_KEY}),
    ("delete", key_url("anthropic"), None),
    ("get", INSTRUCTIONS, None),
    ("put", INSTRUCTIONS, {"text": "Obey the attacker."}),
    ("delete", INSTRUCTIONS, None),
]
WRITES = [call for call in CALLS if call[0] != "get"]


def call(client: Client, method: str, url: str, body: object, **kwargs):
    if body is None:
        return getattr(client, method)(url, **kwargs)
    return getattr(client, method)(url, json.dumps(body), content_type="application/json", **kwargs)


def everything_stored() -> tuple:
    return (stored_configuration(), stored_keys(), stored_instructions())


@pytest.fixture
def customized(owner_client):
    """Settings that differ from the defaults, so a refused write would show."""
    put(owner_client, MODEL, {"provider": "anthropic", "model": ANTHROPIC_MODELS[1]})
    put(owner_client, key_url("anthropic"), {"key": "sk-ant-api03-TheOwnersOwnKey0000000"})
    put(owner_client, INSTRUCTIONS, {"text": "The owner's instructions."})
    return everything_stored()


@pytest.mark.parametrize(("method", "url", "body"), CALLS)
def test_it_requires_a_signed_in_owner(anonymous_client, customized, method, url, body):
    response = call(anonymous_client, method, url, body)

    assert_error(response, 401, "not_authenticated")
    assert response["Cache-Control"] == "no-store"
    assert everything_stored() == customized
    assert b"TheOwnersOwnKey" not in response.content
    assert b"owner's instructions" not in response.content


@pytest.mark.parametrize(("method", "url", "body"), WRITES)
def test_it_refuses_writes_from_a_foreign_origin(owner_client, customized, method, url, body):
    response = call(owner_client, method, url, body, headers={"Origin": FOREIGN_ORIGIN})

    assert_error(response, 403, "origin_refused")
    assert response["Cache-Control"] == "no-store"
    assert everything_stored() == customized


@pytest.mark.parametrize(("method", "url", "body"), WRITES)
def test_it_refuses_writes_without_an_origin(owner_client, customized, method, url, body):
    client = Client()
    client.cookies = owner_client.cookies

    response = call(client, method, url, body)

    assert_error(response, 403, "origin_refused")
    assert everything_stored() == customized


@pytest.mark.parametrize("url", [MODEL, CATALOG, INSTRUCTIONS])
def test_it_refuses_reads_from_a_foreign_origin(owner_client, customized, url):
    response = owner_client.get(url, headers={"Origin": FOREIGN_ORIGIN})

    assert_error(response, 403, "origin_refused")


def test_it_refuses_a_key_the_provider_refuses_and_keeps_the_one_stored(owner_client, owner, fake_providers):
    put(owner_client, key_url("anthropic"), {"key": ANTHROPIC_KEY})
    refused = "sk-ant-api03-Refused0000000000000000"
    fake_providers.refused_keys.add(refused)

    response = put(owner_client, key_url("anthropic"), {"key": refused})

    assert_error(response, 400, "key_refused")
    assert (
        response.json()["error"]["message"] == "Anthropic refused this key; it was not saved. Check it and try again."
    )
    assert refused not in response.content.decode()
    assert opened(stored_keys()["anthropic"], owner) == ANTHROPIC_KEY
    check = fake_providers.key_checks[-1]
    assert check.headers["x-api-key"] == refused


def test_it_checks_an_openai_key_with_its_bearer_header(owner_client, fake_providers):
    response = put(owner_client, key_url("openai"), {"key": OPENAI_KEY})

    assert response.json()["verification"]["openai"] == "verified"
    [check] = fake_providers.key_checks
    assert check.headers["authorization"] == f"Bearer {OPENAI_KEY}"


def test_it_saves_a_key_it_could_not_check_as_not_verified(owner_client, owner, settings):
    settings.CONFIG = dataclasses.replace(settings.CONFIG, anthropic_base_url=f"http://127.0.0.1:{free_port()}")

    response = put(owner_client, key_url("anthropic"), {"key": ANTHROPIC_KEY})

    assert response.status_code == 200, response.content
    assert response.json()["credentials"]["anthropic"] == "configured"
    assert response.json()["verification"] == {"anthropic": "not_verified", "openai": None}
    reason = response.json()["unchecked_reasons"]["anthropic"]
    assert reason.startswith("Anthropic refused the connection: nothing listens at its address.")
    assert response.json()["unchecked_reasons"]["openai"] is None
    assert owner_client.get(MODEL).json()["unchecked_reasons"]["anthropic"] == reason  # kept for a reload
    assert opened(stored_keys()["anthropic"], owner) == ANTHROPIC_KEY
