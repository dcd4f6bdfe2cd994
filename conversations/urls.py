from django.urls import path

from conversations import api

urlpatterns = [
    path("conversations/", api.ConversationListApi.as_view(), name="conversation-list"),
    path("conversations/<str:conversation_id>/", api.ConversationDetailApi.as_view(), name="conversation-detail"),
]
