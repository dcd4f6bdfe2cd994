from django.db import migrations, models


def earlier_conversations_titled(apps, schema_editor):
    """Conversations that had turns before model titles keep the names they have: the model is not asked."""
    Conversation = apps.get_model("conversations", "Conversation")
    Conversation.objects.filter(last_turn_ordinal__gt=0, titled_at__isnull=True).update(
        titled_at=models.F("updated_at")
    )


class Migration(migrations.Migration):

    dependencies = [
        ("conversations", "0014_conversation_untrusted_read_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="titled_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(earlier_conversations_titled, migrations.RunPython.noop),
    ]
