"""Conversations: the owner's separate threads with Flarebot."""

from __future__ import annotations

from django.db import models

from flarebot.core.models import BaseModel, SingletonModel


class ConversationState(models.TextChoices):
    ACTIVE = "active", "Active"
    # Inaccessible to every route and socket; its data is being torn down.
    DELETING = "deleting", "Deleting"


class Conversation(BaseModel):
    """One conversation. `updated_at` is its latest message (or its creation): a rename leaves it."""

    name = models.CharField(max_length=120)
    # The owner chose the name (at creation or by renaming); otherwise the first message
    # titles the conversation (conversations.titles), then the model (conversations.titling).
    name_is_custom = models.BooleanField(default=False)
    # When the model was asked to name it (`titling.conversation_title_ask` claims the
    # request by setting it): null until its first answer completes, and again after an
    # edit of its first message.
    titled_at = models.DateTimeField(null=True, blank=True)
    # Counters bumped with F() updates (which leave updated_at alone): the event log's
    # high-water mark and the ordinal of the latest turn.
    last_sequence = models.PositiveBigIntegerField(default=0)
    last_turn_ordinal = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=16, choices=ConversationState.choices, default=ConversationState.ACTIVE)
    # The shown branch (conversations.versions): its newest turn, and that turn's parent.
    # Every turn reservation sets both in its one statement (the parent column takes the
    # head as it was), which is how a new turn learns what it follows.
    branch_head = models.UUIDField(null=True, blank=True)
    branch_head_parent = models.UUIDField(null=True, blank=True)
    deletion_requested_at = models.DateTimeField(null=True, blank=True)
    # The owner's read mark (conversation_read): the last sequence a page showed, never moved
    # back, and when it last moved (what the needs-you list clears by opening).
    read_sequence = models.PositiveBigIntegerField(default=0)
    read_at = models.DateTimeField(null=True, blank=True)
    # When a tool call of this conversation first read content from outside (the web, an
    # attachment), set before that call ran: from then on its writes outside the turn are
    # proposals (conversations.write_proposals). Never cleared.
    untrusted_read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=ConversationState.values), name="conv_conversation_state_valid"
            ),
        ]
        indexes = [
            # conversation_list: active conversations, newest updated_at first, then id
            models.Index(fields=["state", "-updated_at", "id"], name="conv_conversation_list"),
        ]

    def __str__(self) -> str:
        return self.name


class TurnStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


TERMINAL_TURN_STATUSES = (TurnStatus.COMPLETED, TurnStatus.FAILED, TurnStatus.CANCELLED)


class Turn(BaseModel):
    """One user message and the agent's work answering it.

    Turns of a conversation run one at a time in `ordinal` order. A worker owns a turn
    while its lease (`lease_token`, `lease_expires_at`) is live; the reconciliation job
    requeues turns whose lease expired because their worker died.
    """

    # Its lookups are served by the composite indexes below, which start with it.
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns", db_index=False)
    ordinal = models.PositiveIntegerField()
    request_id = models.UUIDField()
    status = models.CharField(max_length=16, choices=TurnStatus.choices, default=TurnStatus.QUEUED)
    cancel_requested = models.BooleanField(default=False)
    attempts = models.PositiveIntegerField(default=0)
    # Attempts in a row that ended (stall, crash, dropped stream) without new output.
    attempts_without_progress = models.PositiveIntegerField(default=0)
    lease_token = models.CharField(max_length=32, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    provider = models.CharField(max_length=32, blank=True, default="")
    model = models.CharField(max_length=128, blank=True, default="")
    steps = models.PositiveIntegerField(default=0)
    error_code = models.CharField(max_length=64, blank=True, default="")
    error_message = models.CharField(max_length=500, blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Versions (conversations.versions): the turn this one follows (None for a first turn),
    # the turn whose message this one answers again (Regenerate, Retry; None when it has
    # its own), and whether it is on the shown branch, which is all the transcript, the
    # model, search and export see.
    parent_turn_id = models.UUIDField(null=True, blank=True)
    prompt_turn_id = models.UUIDField(null=True, blank=True)
    shown = models.BooleanField(default=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "request_id"], name="conv_turn_request_unique"),
            models.UniqueConstraint(fields=["conversation", "ordinal"], name="conv_turn_ordinal_unique"),
            models.CheckConstraint(condition=models.Q(status__in=TurnStatus.values), name="conv_turn_status_valid"),
        ]
        indexes = [
            # turn_claim / turn_next_runnable: unfinished turns of a conversation in order
            models.Index(fields=["conversation", "status", "ordinal"], name="conv_turn_queue"),
            # turns_reconcile: running turns whose lease expired, queued turns left behind
            models.Index(fields=["status", "lease_expires_at"], name="conv_turn_lease"),
        ]


class MessageRole(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"


# Transcript order: messages sort by one column, `Message.ordinal`. A turn's user message
# sits at twice the turn's ordinal and its answer right after it; every writer of a message
# (and the transcript's reads up to a turn) takes the place from these two.
TURN_MESSAGES = 2


def user_message_ordinal(turn_ordinal: int) -> int:
    """Where the user message of the turn with this ordinal sits in the transcript."""
    return TURN_MESSAGES * turn_ordinal


def answer_ordinal(turn_ordinal: int) -> int:
    """Where the answer of the turn with this ordinal sits: right after its user message."""
    return user_message_ordinal(turn_ordinal) + 1


class Message(BaseModel):
    """A transcript message: the user's text, or the assistant's text and tool parts of a turn."""

    # Both served by the composite indexes below, which start with them: every message
    # written while streaming would otherwise update two more indexes.
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages", db_index=False)
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="messages", db_index=False)
    role = models.CharField(max_length=16, choices=MessageRole.choices)
    # Transcript order (user_message_ordinal, answer_ordinal).
    ordinal = models.PositiveIntegerField()
    parts = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["turn", "role"], name="conv_message_turn_role_unique"),
            models.CheckConstraint(condition=models.Q(role__in=MessageRole.values), name="conv_message_role_valid"),
        ]
        indexes = [
            # transcript_snapshot, transcript_until: a conversation's transcript in order
            models.Index(fields=["conversation", "ordinal"], name="conv_message_transcript"),
        ]


# The events that put a message of the agent before the owner (an answer that ended, a
# browser task's question or outcome): what `"unread"` counts after the read mark.
UNREAD_EVENT_KINDS = ("turn.completed", "turn.failed", "critical_point.opened", "browser_task.finished")


class Event(BaseModel):
    """One durable entry of a conversation's event log, numbered without gaps by `sequence`."""

    # Served by the sequence constraint's index, which starts with it: each streamed window
    # inserts events, and a second index on the same column only cost time.
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="events", db_index=False)
    sequence = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=40)
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, null=True, blank=True, related_name="events")
    data = models.JSONField(default=dict)

    class Meta:
        constraints = [
            # Also the index of event_list_after (replay after a sequence).
            models.UniqueConstraint(fields=["conversation", "sequence"], name="conv_event_sequence_unique"),
        ]
        indexes = [
            # conversations_unread: the agent's messages after a read mark (only those kinds: small)
            models.Index(
                fields=["conversation", "sequence"],
                name="conv_event_unread",
                condition=models.Q(kind__in=UNREAD_EVENT_KINDS),
            ),
        ]


class ModelConfiguration(SingletonModel):
    """The provider and model every conversation uses (one row; absent means the default)."""

    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=128)

    class Meta(SingletonModel.Meta):
        pass


class ProviderKey(BaseModel):
    """A provider's API key, sealed with AES-256-GCM (see flarebot.core.crypto); never plaintext."""

    provider = models.CharField(max_length=32, unique=True)
    sealed = models.BinaryField()
    # When the provider last took this key; None: it could not be asked when it was saved.
    verified_at = models.DateTimeField(null=True, blank=True)
    # Why it could not be checked (a safe, classified message), when it could not.
    unchecked_reason = models.CharField(max_length=300, blank=True, default="")


class InstructionOverride(SingletonModel):
    """The owner's instructions replacing the shipped defaults; absent means the defaults."""

    text = models.TextField()

    class Meta(SingletonModel.Meta):
        pass


class SearchEntry(BaseModel):
    """The searchable text of a conversation's name, or of one message of a finished turn.

    The source of the full-text index of `GET /api/conversations/?q=` (the index itself is
    the migration's: FTS5 on SQLite, a generated tsvector on PostgreSQL). Written when a
    turn ends and when a conversation is named, never while an answer streams.
    """

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+", db_index=False)
    # None for the conversation's name.
    message = models.ForeignKey(
        Message, on_delete=models.CASCADE, null=True, blank=True, related_name="+", db_index=False
    )  # looked up through the unique constraint below
    text = models.TextField()

    class Meta:
        constraints = [
            # search_index_name: one entry for a conversation's name (also its lookup index)
            models.UniqueConstraint(
                fields=["conversation"], condition=models.Q(message__isnull=True), name="conv_search_title_unique"
            ),
            # search_index_turn: one entry per message
            models.UniqueConstraint(fields=["message"], name="conv_search_message_unique"),
        ]
        indexes = [
            # conversation_teardown: the conversation's entries go with it (the cascade's lookup)
            models.Index(fields=["conversation"], name="conv_search_conversation"),
        ]


class ProposalState(models.TextChoices):
    PROPOSED = "proposed", "Proposed"  # waiting for the owner's Start or Dismiss
    DISMISSED = "dismissed", "Dismissed"
    SUPERSEDED = "superseded", "Superseded"  # a newer proposal of the conversation replaced it
    STARTED = "started", "Started"


class BrowserTaskProposal(BaseModel):
    """A browser task the model proposed in a turn: nothing runs until the owner starts it.

    A proposal made while a task of the conversation is unfinished corrects that task
    (`corrects`): the task's restrictions lead its own (`carried` of them, never fewer), and
    its Start supersedes the task if it is paused.
    """

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+", db_index=False)
    turn_id = models.UUIDField()
    tool_call_id = models.CharField(max_length=128)
    goal = models.TextField()
    start_url = models.TextField()
    restrictions = models.JSONField(default=list)
    state = models.CharField(max_length=16, choices=ProposalState.choices, default=ProposalState.PROPOSED)
    # Only read through the proposal (browser_task_start): no index of its own.
    corrects = models.ForeignKey(
        "BrowserTask", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    carried = models.PositiveSmallIntegerField(default=0)  # the first `carried` restrictions are the task's

    class Meta:
        constraints = [
            # browser_task_propose: a replayed tool call finds its proposal
            models.UniqueConstraint(fields=["turn_id", "tool_call_id"], name="conv_btproposal_call_unique"),
            models.CheckConstraint(
                condition=models.Q(state__in=ProposalState.values), name="conv_btproposal_state_valid"
            ),
        ]
        indexes = [
            # browser_task_propose (superseding) and browser_tasks_list: a conversation's proposals in order
            models.Index(fields=["conversation", "created_at"], name="conv_btproposal_conversation"),
            # attention_items: proposals waiting for the owner, newest first
            models.Index(fields=["-created_at"], name="conv_btproposal_waiting", condition=models.Q(state="proposed")),
        ]


class BrowserTaskStatus(models.TextChoices):
    RUNNING = "running", "Running"  # to be run, or running (its lease says whether someone runs it)
    PAUSED = "paused", "Paused"  # waiting for the owner's answer to its open critical point
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    SUPERSEDED = "superseded", "Superseded"  # the owner started a correction of it while it was paused


UNFINISHED_TASK_STATUSES = (BrowserTaskStatus.RUNNING, BrowserTaskStatus.PAUSED)


class BrowserTask(BaseModel):
    """A started browser task: its durable start command, checkpoint, lease and outcome.

    The start command (goal, restrictions, start URL) is copied from the proposal exactly
    and never changes. The checkpoint is `steps` (every decision so far and its result),
    `current_url` and `storage_sealed` (the context's cookies and local storage, sealed like
    provider keys), written when the task pauses. A worker owns the task while its lease
    (`lease_token`, `lease_expires_at`) is live; `context_lease_id` names the tools app's
    lease of the Chromium context that holds (or kept) its page. `authorization` is what the
    owner's last reply allows the next step to do, bound to that context.
    """

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+", db_index=False)
    proposal = models.OneToOneField(BrowserTaskProposal, on_delete=models.CASCADE, related_name="task")
    goal = models.TextField()
    start_url = models.TextField()
    restrictions = models.JSONField(default=list)
    status = models.CharField(max_length=16, choices=BrowserTaskStatus.choices, default=BrowserTaskStatus.RUNNING)
    cancel_requested = models.BooleanField(default=False)
    lease_token = models.CharField(max_length=32, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    actions = models.PositiveIntegerField(default=0)
    running_ms = models.PositiveBigIntegerField(default=0)  # pauses excluded
    steps = models.JSONField(default=list)
    current_url = models.TextField(blank=True, default="")
    storage_sealed = models.BinaryField(null=True, blank=True)
    context_lease_id = models.UUIDField(null=True, blank=True)
    authorization = models.JSONField(null=True, blank=True)
    outcome_summary = models.TextField(blank=True, default="")
    finished_at = models.DateTimeField(null=True, blank=True)
    projected_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=BrowserTaskStatus.values), name="conv_browsertask_status_valid"
            ),
            # browser_task_start: at most one unfinished task per conversation, also under races
            models.UniqueConstraint(
                fields=["conversation"],
                condition=models.Q(status__in=["running", "paused"]),
                name="conv_browsertask_one_unfinished",
            ),
        ]
        indexes = [
            # browser_tasks_list, browser_task_cancel: a conversation's tasks
            models.Index(fields=["conversation", "created_at"], name="conv_browsertask_conversation"),
            # browser_tasks_reconcile: running tasks whose lease ran out, and unprojected outcomes
            models.Index(
                fields=["lease_expires_at"], name="conv_browsertask_running", condition=models.Q(status="running")
            ),
            models.Index(
                fields=["finished_at"],
                name="conv_browsertask_unprojected",
                condition=models.Q(finished_at__isnull=False, projected_at__isnull=True),
            ),
        ]


class CriticalPointKind(models.TextChoices):
    CONFIRM = "confirm", "Confirm"  # the runtime held a critical action
    QUESTION = "question", "Question"  # ask_owner
    SIGN_IN = "sign_in", "Sign in"  # request_sign_in: the owner signs in through the live view
    EMAIL_CONSENT = "email_consent", "Email consent"  # request_email_consent


class CriticalPointState(models.TextChoices):
    OPEN = "open", "Open"
    RESOLVED = "resolved", "Resolved"  # the owner answered
    VOID = "void", "Void"  # the task ended before an answer


class CriticalPoint(BaseModel):
    """A question a paused browser task put to the owner, and the owner's answer.

    `action` is the held action as the owner may see it (tool, element, a description, and
    for a network hold the requests it tried: method, host, path, field names; never typed
    text or field values); `action_digest` identifies the exact action, typed text included,
    so that only exactly that action can be authorised by the answer. An email consent may
    be bound to one action the same way.
    """

    task = models.ForeignKey(BrowserTask, on_delete=models.CASCADE, related_name="critical_points", db_index=False)
    kind = models.CharField(max_length=16, choices=CriticalPointKind.choices)
    question = models.TextField()
    action = models.JSONField(null=True, blank=True)
    action_digest = models.CharField(max_length=64, blank=True, default="")
    state = models.CharField(max_length=16, choices=CriticalPointState.choices, default=CriticalPointState.OPEN)
    response = models.TextField(blank=True, default="")  # the owner's exact text (question, confirm, sign_in)
    consent = models.BooleanField(null=True, blank=True)  # email_consent
    # confirm: the owner's explicit Approve (True) or Deny (False); None when they only wrote.
    # Only True authorises the held action; the words never do.
    approved = models.BooleanField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=CriticalPointKind.values), name="conv_criticalpoint_kind_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(state__in=CriticalPointState.values), name="conv_criticalpoint_state_valid"
            ),
            # critical_point_answer, browser_tasks_list, attention_items: one open question per task (also their lookup)
            models.UniqueConstraint(
                fields=["task"], condition=models.Q(state="open"), name="conv_criticalpoint_one_open"
            ),
        ]
        indexes = [
            # browser_tasks_list: a task's points
            models.Index(fields=["task", "created_at"], name="conv_criticalpoint_task"),
        ]
