from django.urls import re_path

from tasks import consumers

# Before the conversations' patterns, whose last one refuses every other path (flarebot/asgi.py).
websocket_urlpatterns = [
    re_path(r"^ws/tasks/$", consumers.TasksConsumer.as_asgi()),
]
