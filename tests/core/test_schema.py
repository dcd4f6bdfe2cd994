"""The OpenAPI document at /api/schema/: the owner's, like every other /api/ route."""

from __future__ import annotations


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
