from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    """What the owner is told outside the page: destinations, kinds, quiet hours, deliveries."""

    name = "notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from conversations.signals import events_stored
        from notifications.services import notifications_record_events

        events_stored.connect(notifications_record_events, dispatch_uid="notifications.record")
