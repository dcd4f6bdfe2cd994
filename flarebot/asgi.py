"""The ASGI entry point served by daphne: Django over HTTP, the conversation socket over WS."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flarebot.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from conversations.routing import websocket_urlpatterns  # noqa: E402
from flarebot.core.heap import heap_settle  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # Origin, session and owner are checked by the consumer before it admits a socket;
        # a refused one is accepted and closed at once with its code (flarebot.core.sockets).
        "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
    }
)

# Everything loaded so far lives as long as the process: keep it out of GC pauses.
heap_settle()
