"""A file attached in a new chat is uploaded to no conversation until a message claims it."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('attachments', '0003_tool_returned'),
        ('conversations', '0014_conversation_untrusted_read_at'),
    ]

    operations = [
        migrations.AlterField(
            model_name='attachment',
            name='conversation',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.conversation'),
        ),
        migrations.AddConstraint(
            model_name='attachment',
            constraint=models.CheckConstraint(condition=models.Q(('message__isnull', True), ('conversation__isnull', False), _connector='OR'), name='attachments_sent_in_conversation'),
        ),
    ]
