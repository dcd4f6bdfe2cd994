from django.urls import path

from attachments import api

urlpatterns = [
    path(
        "conversations/<str:conversation_id>/attachments/",
        api.AttachmentUploadApi.as_view(),
        name="attachment-upload",
    ),
    path("attachments/<str:attachment_id>/", api.AttachmentDetailApi.as_view(), name="attachment-detail"),
]
