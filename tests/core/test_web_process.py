"""The web process's access log: paths without their query strings (tokens, search words)."""

from __future__ import annotations

from flarebot.web import without_queries


def test_it_writes_the_path_without_the_query():
    written = []
    log = without_queries(lambda protocol, action, details: written.append((protocol, action, details)))

    log("http", "complete", {"path": "/setup/?token=secret-token", "status": 200})
    log("websocket", "connected", {"path": "/ws/conversations/x/?last_sequence=4"})
    log("http", "complete", {"path": "/api/conversations/", "status": 200})

    assert [details["path"] for _, _, details in written] == [
        "/setup/?…",
        "/ws/conversations/x/?…",
        "/api/conversations/",
    ]
    assert written[0][2]["status"] == 200
    assert "secret-token" not in repr(written)
