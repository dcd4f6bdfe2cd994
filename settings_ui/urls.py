from django.urls import path

from settings_ui import api, views

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.login_view, name="login"),
    path("logout/", views.logout_view, name="logout"),
    path("setup/", views.setup_view, name="setup"),
    path("settings/", views.settings_page, name="settings"),
    path("api/system/", api.SystemApi.as_view(), name="system"),
    path("api/attention/", api.AttentionApi.as_view(), name="attention"),
    path("api/account/password/", api.PasswordChangeApi.as_view(), name="account-password"),
]
