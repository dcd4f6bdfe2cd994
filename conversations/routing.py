from django.urls import re_path

from conversations import consumers

websocket_urlpatterns = [
    re_path(r"^ws/conversations/(?P<conversation_id>[^/]+)/$", consumers.ConversationConsumer.as_asgi()),
    re_path(r"", consumers.UnknownRouteConsumer.as_asgi()),
]
