"""The project's own documents: every route, frame type and event kind the code serves is in docs/.

The protocol document is the contract clients are written against (`docs/protocol.md`):
something served but not written there is something no client can rely on. These tests
read the code's own lists (the URL resolvers, the client frame parser, the socket's
server frames, `EventKind`) and look for each in the document.
"""

from __future__ import annotations

import re

from django.urls import URLPattern, URLResolver, get_resolver

from conversations.events import EventKind
from conversations.frames import _FIELDS as CLIENT_FRAMES
from conversations.routing import websocket_urlpatterns
from flarebot.core.env import BASE_DIR
from tasks.routing import websocket_urlpatterns as tasks_websocket_urlpatterns

DOCS = BASE_DIR / "docs"
PROTOCOL = (DOCS / "protocol.md").read_text(encoding="utf-8")
# Server frames are the dicts the socket sends: `{"type": "..."}` literals and TypedDicts' Literal types.
SERVER_FRAME_SOURCES = [
    BASE_DIR / "conversations" / "consumers.py",
    BASE_DIR / "conversations" / "eventlog.py",
    BASE_DIR / "flarebot" / "core" / "sockets.py",
    BASE_DIR / "tasks" / "consumers.py",
]


def http_routes(patterns=None, prefix: str = "") -> list[str]:
    """Every served path pattern, as Django resolves it (the admin's own pages aside)."""
    found: list[str] = []
    for pattern in patterns if patterns is not None else get_resolver().url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            if route.startswith("admin/"):
                found.append("admin/")
                continue
            found += http_routes(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            found.append(route)
    return found


def documented(route: str) -> bool:
    """Whether `/route` is in the protocol, its `<converter:name>` parts written as `{any_name}`."""
    regex = "".join(
        r"\{[a-z_]+\}" if part.startswith("<") else re.escape(part) for part in re.split(r"(<[^>]+>)", route)
    )
    return re.search(r"(?<![\w/])/" + regex + r"(?![\w/{])", PROTOCOL) is not None


def server_frame_types() -> set[str]:
    found: set[str] = set()
    for path in SERVER_FRAME_SOURCES:
        source = path.read_text(encoding="utf-8")
        found |= set(re.findall(r'[{,]\s*"type":\s*"([a-z_]+)"', source))
        found |= set(re.findall(r'type="([a-z_]+)"', source))
        found |= set(re.findall(r'type: Literal\["([a-z_]+)"\]', source))
    return found


def test_every_http_route_is_in_the_protocol():
    routes = http_routes()

    assert "api/conversations/<str:conversation_id>/messages/" in routes  # it looked at the real resolver
    assert [route for route in routes if not documented(route)] == []


def test_the_socket_route_is_in_the_protocol():
    [conversation, _] = websocket_urlpatterns
    assert conversation.pattern.regex.pattern.startswith("^ws/conversations/")
    assert "/ws/conversations/{id}/" in PROTOCOL


def test_the_tasks_socket_route_is_in_the_protocol():
    [tasks] = tasks_websocket_urlpatterns
    assert tasks.pattern.regex.pattern == "^ws/tasks/$"
    assert "/ws/tasks/" in PROTOCOL


def test_every_client_frame_type_is_in_the_protocol():
    assert len(CLIENT_FRAMES) >= 7
    assert [kind for kind in CLIENT_FRAMES if f'"type": "{kind}"' not in PROTOCOL] == []


def test_every_server_frame_type_is_in_the_protocol():
    types = server_frame_types()

    assert {"event", "ack", "error", "frame"} <= types
    assert [kind for kind in sorted(types) if f'"type": "{kind}"' not in PROTOCOL] == []


def test_every_event_kind_is_in_the_protocol():
    assert [kind.value for kind in EventKind if f"`{kind.value}`" not in PROTOCOL] == []


def test_the_check_finds_what_is_missing():
    assert documented("api/conversations/<str:conversation_id>/messages/")
    assert not documented("api/conversations/<str:conversation_id>/bookmarks/")
    assert documented("api/conversations/")


def test_the_readme_points_to_the_documents_that_exist():
    readme = (BASE_DIR / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\((docs/[a-z_-]+\.md)\)", readme)) | set(re.findall(r"\((bench/README\.md)\)", readme))

    assert {"docs/protocol.md", "docs/architecture.md", "docs/tools.md"} <= linked
    assert [name for name in sorted(linked) if not (BASE_DIR / name).exists()] == []
    assert "../shared/" not in readme
