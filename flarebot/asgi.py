"""The ASGI entry point served by daphne: Django over HTTP, the conversation and Tasks sockets over WS."""

from __future__ import annotations

import os
from typing import Any

import django
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.db import connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flarebot.settings")


class RequestConnectionsClosed(ASGIHandler):
    """Django over HTTP, closing each request's database connection as the request ends.

    Under ASGI, Django runs a request's synchronous code on a thread of its own that ends
    with the request, so a connection kept there for reuse (`CONN_MAX_AGE`) is never reused
    and stays open until the garbage collector finds it: on PostgreSQL every request of a
    burst held one, and a hundred exhausted the server. Django's docs say as much:
    persistent connections are not for ASGI requests. The sockets' database calls run on
    long-lived threads (`flarebot.core.database.db`) and keep theirs.
    """

    async def handle(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().handle(scope, receive, send)
        finally:
            # Inside the request's context: this runs on the request's own thread.
            await sync_to_async(connections.close_all)()


django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does
django_asgi_app = RequestConnectionsClosed()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from conversations.routing import websocket_urlpatterns  # noqa: E402
from flarebot.core.heap import heap_settle  # noqa: E402
from tasks.routing import websocket_urlpatterns as tasks_websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # Origin, session and owner are checked by the consumer before it admits a socket;
        # a refused one is accepted and closed at once with its code (flarebot.core.sockets).
        "websocket": AuthMiddlewareStack(URLRouter([*tasks_websocket_urlpatterns, *websocket_urlpatterns])),
    }
)

# Everything loaded so far lives as long as the process: keep it out of GC pauses.
heap_settle()
