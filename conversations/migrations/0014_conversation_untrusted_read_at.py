from django.db import migrations, models
from django.db.models import Min, OuterRef, Subquery

# The tools that read content from outside when this column came (`Tool.reads_untrusted`).
UNTRUSTED_TOOLS = ("browser_read", "read_attachment", "read_url", "web_search")


def earlier_reads_recorded(apps, schema_editor):
    """Conversations whose tool calls read outside content before the column existed keep that fact."""
    Conversation = apps.get_model("conversations", "Conversation")
    ToolActivity = apps.get_model("tools", "ToolActivity")
    first_read = (
        ToolActivity.objects.filter(conversation_id=OuterRef("id"), kind__in=UNTRUSTED_TOOLS)
        .values("conversation_id")
        .annotate(first=Min("created_at"))
        .values("first")
    )
    Conversation.objects.filter(untrusted_read_at__isnull=True).update(untrusted_read_at=Subquery(first_read))


class Migration(migrations.Migration):

    dependencies = [
        ("conversations", "0013_conversation_read_sequence"),
        ("tools", "0009_activity_unavailable_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="untrusted_read_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(earlier_reads_recorded, migrations.RunPython.noop),
    ]
