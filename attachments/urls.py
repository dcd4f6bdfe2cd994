from django.urls import path

from attachments import api
from attachments.limits import too_large_message
from attachments.uploads import UPLOAD_BODY_MAX
from flarebot.core.request_bounds import body_max

urlpatterns = [
    path(
        "conversations/<str:conversation_id>/attachments/",
        body_max(UPLOAD_BODY_MAX, too_large_message())(api.AttachmentUploadApi.as_view()),
        name="attachment-upload",
    ),
    path(
        "attachments/",
        body_max(UPLOAD_BODY_MAX, too_large_message())(api.UnsentUploadApi.as_view()),
        name="attachment-upload-unsent",
    ),
    path("attachments/<str:attachment_id>/", api.AttachmentDetailApi.as_view(), name="attachment-detail"),
]
