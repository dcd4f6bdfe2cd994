from django.urls import path

from notifications import api

urlpatterns = [
    path("notifications/destinations/", api.DestinationListApi.as_view(), name="notification-destinations"),
    path(
        "notifications/destinations/<str:destination_id>/",
        api.DestinationDetailApi.as_view(),
        name="notification-destination",
    ),
    path(
        "notifications/destinations/<str:destination_id>/test/",
        api.DestinationTestApi.as_view(),
        name="notification-destination-test",
    ),
    path("notifications/settings/", api.SettingsApi.as_view(), name="notification-settings"),
]
