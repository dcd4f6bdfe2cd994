"""Top-level routes; each app owns the routes under its prefix."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from flarebot.core import views as core_views

ACCOUNT = "/settings/#account"

urlpatterns = [
    path("status/", core_views.status, name="status"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/", include("conversations.urls")),
    path("api/", include("attachments.urls")),
    path("api/", include("memory.urls")),
    path("api/", include("tasks.urls")),
    path("api/", include("notifications.urls")),
    # The admin signs in through Flarebot's own throttled sign-in page.
    path("admin/login/", RedirectView.as_view(url="/login/?next=/admin/", query_string=False)),
    # Passwords change in Settings -> Account only, where a wrong current password counts as
    # a failed sign-in (throttled); the admin's own forms would try passwords without a limit.
    path("admin/password_change/", RedirectView.as_view(url=ACCOUNT, query_string=False)),
    path("admin/password_change/done/", RedirectView.as_view(url=ACCOUNT, query_string=False)),
    path("admin/auth/user/<str:user_id>/password/", RedirectView.as_view(url=ACCOUNT, query_string=False)),
    path("admin/", admin.site.urls),
    path("", include("settings_ui.urls")),
]

handler404 = core_views.not_found
handler500 = core_views.server_error
