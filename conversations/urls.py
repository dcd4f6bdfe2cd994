from django.urls import path

from conversations import api, api_proposals, api_settings, api_transcript
from conversations.browser_tasks import api as browser_tasks_api

urlpatterns = [
    path("conversations/", api.ConversationListApi.as_view(), name="conversation-list"),
    path("conversations/<str:conversation_id>/", api.ConversationDetailApi.as_view(), name="conversation-detail"),
    path("conversations/<str:conversation_id>/read/", api.ConversationReadApi.as_view(), name="conversation-read"),
    path("conversations/<str:conversation_id>/clear/", api.ConversationClearApi.as_view(), name="conversation-clear"),
    path("conversations/<str:conversation_id>/title/", api.ConversationTitleApi.as_view(), name="conversation-title"),
    path("conversations/<str:conversation_id>/messages/", api_transcript.MessageListApi.as_view(), name="messages"),
    path("conversations/<str:conversation_id>/events/", api_transcript.EventListApi.as_view(), name="events"),
    path("conversations/<str:conversation_id>/cancel/", api_transcript.CancelApi.as_view(), name="cancel"),
    path("conversations/<str:conversation_id>/export/", api_transcript.ExportApi.as_view(), name="export"),
    path("conversations/<str:conversation_id>/branch/", api_transcript.BranchApi.as_view(), name="branch"),
    path(
        "conversations/<str:conversation_id>/activities/",
        api_transcript.ActivityListApi.as_view(),
        name="activities",
    ),
    path(
        "conversations/<str:conversation_id>/browser-tasks/",
        browser_tasks_api.BrowserTaskListApi.as_view(),
        name="browser-tasks",
    ),
    path(
        "conversations/<str:conversation_id>/write-proposals/",
        api_proposals.WriteProposalListApi.as_view(),
        name="write-proposals",
    ),
    path(
        "conversations/<str:conversation_id>/write-proposals/<str:proposal_id>/",
        api_proposals.WriteProposalDecisionApi.as_view(),
        name="write-proposal-decision",
    ),
    path("agent/", browser_tasks_api.AgentApi.as_view(), name="agent"),
    path("settings/model/", api_settings.ModelSettingsApi.as_view(), name="model-settings"),
    path("settings/model/catalog/", api_settings.ModelCatalogApi.as_view(), name="model-catalog"),
    path("settings/provider-keys/<str:provider>/", api_settings.ProviderKeyApi.as_view(), name="provider-key"),
    path("settings/instructions/", api_settings.InstructionsApi.as_view(), name="instructions"),
]
