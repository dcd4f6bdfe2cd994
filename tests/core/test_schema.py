"""The OpenAPI document at /api/schema/: the owner's, like every other /api/ route."""

from __future__ import annotations

import pytest
import yaml


def test_it_serves_the_openapi_document_to_the_owner(owner_client):
    response = owner_client.get("/api/schema/")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi")
    content = response.content.decode()
    assert content.startswith("openapi: 3.")
    assert "/api/conversations/:" in content
    assert "/api/conversations/{conversation_id}/:" in content
    assert "__Host-flarebot-session" in content


def test_it_refuses_the_schema_when_signed_out(owner, anonymous_client):
    response = anonymous_client.get("/api/schema/")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert b"openapi" not in response.content


@pytest.fixture
def document(owner_client) -> dict:
    return yaml.safe_load(owner_client.get("/api/schema/").content)


def response_schema(document: dict, operation: dict, status: str) -> dict:
    return resolve(document, operation["responses"][status]["content"]["application/json"]["schema"])


def resolve(document: dict, schema: dict) -> dict:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def test_it_describes_the_lists_as_arrays(document):
    listing = response_schema(document, document["paths"]["/api/conversations/"]["get"], "200")
    conversations, search = (resolve(document, choice) for choice in listing["oneOf"])
    memories = response_schema(document, document["paths"]["/api/memories/"]["get"], "200")

    assert conversations["properties"]["conversations"]["type"] == "array"
    assert resolve(document, conversations["properties"]["conversations"]["items"])["required"] == [
        "created_at",
        "id",
        "name",
        "unread",
        "updated_at",
    ]
    assert search["properties"]["results"]["type"] == "array"
    assert set(resolve(document, search["properties"]["results"]["items"])["properties"]) == {
        "conversation",
        "highlights",
        "matches",
        "message_id",
        "snippet",
    }
    assert memories["properties"]["memories"]["type"] == "array"


def test_it_describes_both_export_downloads(document):
    responses = document["paths"]["/api/conversations/{conversation_id}/export/"]["get"]["responses"]["200"]

    assert set(responses["content"]) == {"text/markdown", "application/json"}
    assert set(resolve(document, responses["content"]["application/json"]["schema"])["properties"]) == {
        "conversation",
        "messages",
        "exported_at",
    }
    assert "Content-Disposition" in responses["headers"]


def test_every_operation_documents_the_guards_refusals_in_the_error_shape(document):
    operations = [operation for item in document["paths"].values() for operation in item.values()]

    assert len(operations) == 53
    for operation in operations:
        for status in ("401", "403", "503"):
            error = response_schema(document, operation, status)
            assert set(resolve(document, error["properties"]["error"])["required"]) == {"code", "message"}


def test_it_describes_ids_as_the_views_parse_them(document):
    def path_parameter(path: str, method: str) -> dict:
        (parameter,) = [p for p in document["paths"][path][method]["parameters"] if p["in"] == "path"]
        return parameter["schema"]

    # Conversation ids are read in any case; fact and task ids in lowercase only.
    assert path_parameter("/api/conversations/{conversation_id}/", "patch") == {"type": "string", "format": "uuid"}
    assert path_parameter("/api/memories/{fact_id}/", "patch")["pattern"].startswith("^[0-9a-f]{8}-")
    assert path_parameter("/api/tasks/{task_id}/", "get")["pattern"].startswith("^[0-9a-f]{8}-")
