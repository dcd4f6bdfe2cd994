# mypy: disable-error-code="union-attr,arg-type,index,operator,misc"
"""The tasks JSON API, as PROTOCOL.md "Scheduled tasks" describes it; refused requests change nothing."""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone
from django_celery_beat.models import ClockedSchedule, PeriodicTask

from conversations.models import Conversation, Message
from conversations.services import conversation_create, conversation_delete
from tasks import runs, services
from tasks.models import RunStatus, Task, TaskRun, TaskState
from tests.tasks.conftest import LIST, assert_error, body, create, detail, edit, runs_url, send

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]

ISO_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$")
T_FIELDS = {
    "id",
    "conversation_id",
    "name",
    "instructions",
    "schedule",
    "schedule_text",
    "enabled",
    "notify_on_completion",
    "version",
    "next_run_at",
    "upcoming",
    "previous_run",
    "scheduling_error",
    "created_at",
    "updated_at",
}
R_FIELDS = {"id", "source", "intended_at", "status", "turn_id", "created_at", "conversation_id", "missed_count"}


def iso(at: datetime) -> str:
    return at.astimezone(ZoneInfo("UTC")).strftime("%Y-%m-%dT%H:%M:%SZ")


def future(minutes: int = 60) -> str:
    return (timezone.now() + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def rows() -> list[tuple]:
    return list(Task.objects.order_by("id").values_list("id", "state", "name", "version", "enabled"))


def periodic(task_id: object) -> PeriodicTask | None:
    return PeriodicTask.objects.filter(name=f"flarebot task {task_id}").select_related("clocked").first()


# ---- creating ---------------------------------------------------------------------------


def test_it_creates_a_task_armed_in_beat_with_its_next_runs(owner_client: Client, conversation: Conversation) -> None:
    data = body(conversation)
    task = create(owner_client, data)

    assert set(task) == T_FIELDS
    assert task["id"] == data["id"]
    assert (task["conversation_id"], task["name"], task["version"], task["enabled"]) == (
        str(conversation.id),
        "Weekly summary",
        1,
        True,
    )
    assert task["schedule"] == {"kind": "cron", "expression": "0 9 * * 1", "timezone": "Europe/Berlin"}
    assert task["schedule_text"] == "Every Monday at 09:00, Europe/Berlin"
    assert task["previous_run"] is None
    assert task["scheduling_error"] is None
    assert len(task["upcoming"]) == 5
    assert all(ISO_Z.match(at) for at in task["upcoming"])
    # Mondays at 09:00 in Berlin: 08:00Z in winter, 07:00Z in summer.
    for at in task["upcoming"]:
        instant = datetime.fromisoformat(at.replace("Z", "+00:00"))
        assert instant.weekday() == 0
        assert instant.strftime("%H:%M") in ("08:00", "07:00")
    # What beat holds is what the task says.
    held = periodic(task["id"])
    assert held is not None
    assert held.enabled
    assert held.task == "tasks.jobs.task_fire"
    assert held.clocked.clocked_time.strftime("%Y-%m-%dT%H:%M:%SZ") == task["next_run_at"] == task["upcoming"][0]
    assert json.loads(held.kwargs) == {"task_id": task["id"]}
    assert send(owner_client, "get", detail(task["id"])).json() == task
    assert send(owner_client, "get", LIST).json() == {"tasks": [task]}


def test_it_returns_the_current_task_for_a_retried_creation_even_after_an_edit(
    owner_client: Client, conversation: Conversation
) -> None:
    at = (timezone.now() + timedelta(days=2)).replace(microsecond=0)
    data = body(conversation, schedule={"kind": "once", "at": at.strftime("%Y-%m-%dT%H:%M:%SZ")})
    first = create(owner_client, data)
    edited = send(owner_client, "put", detail(first["id"]), edit(first, name="Renamed")).json()
    # The same request, written differently: an offset, spaces and leading zeros normalize away.
    same = {**data, "schedule": {"kind": "once", "at": at.astimezone(timezone.get_fixed_timezone(90)).isoformat()}}
    retried = create(owner_client, same)
    assert retried == send(owner_client, "get", detail(first["id"])).json()
    assert (retried["name"], retried["version"]) == ("Renamed", edited["version"])
    cron = body(conversation, schedule={"kind": "cron", "expression": "00 09 * * 01", "timezone": "europe/berlin"})
    made = create(owner_client, cron)
    again = {**cron, "schedule": {"kind": "cron", "expression": " 0  9 * * 1 ", "timezone": "Europe/Berlin"}}
    assert create(owner_client, again)["id"] == made["id"]
    assert Task.objects.count() == 2


def test_it_refuses_a_conflicting_reuse_of_an_id(owner_client: Client, conversation: Conversation) -> None:
    data = body(conversation)
    create(owner_client, data)
    before = rows()
    for change in ({"name": "Other"}, {"enabled": False}, {"instructions": "Something else."}):
        assert_error(send(owner_client, "post", LIST, {**data, **change}), 409, "id_conflict")
    other = conversation_create(name="Other")
    assert_error(send(owner_client, "post", LIST, {**data, "conversation_id": str(other.id)}), 409, "id_conflict")
    assert rows() == before


def test_it_refuses_a_target_that_is_unknown_or_being_deleted(owner_client: Client, conversation: Conversation) -> None:
    assert_error(send(owner_client, "post", LIST, body(uuid.uuid4())), 404, "conversation_not_found")
    conversation_delete(conversation_id=conversation.id)
    assert_error(send(owner_client, "post", LIST, body(conversation)), 404, "conversation_not_found")
    assert rows() == []


# ---- a new conversation with the task -------------------------------------------------


def conversations() -> list[tuple[str, bool]]:
    return list(Conversation.objects.order_by("created_at").values_list("name", "name_is_custom"))


def test_it_creates_the_first_task_with_a_new_conversation_named_after_it(owner_client: Client, db: None) -> None:
    data = body(uuid.uuid4(), name="Morning headlines")
    del data["conversation_id"]
    task = create(owner_client, {**data, "new_conversation": True})

    [made] = Conversation.objects.all()
    assert (made.name, made.name_is_custom, made.state) == ("Morning headlines", True, "active")
    assert task["conversation_id"] == str(made.id)
    assert Task.objects.get(id=task["id"]).conversation_id == made.id
    listed = send(owner_client, "get", "/api/conversations/").json()["conversations"]
    assert [(c["id"], c["name"]) for c in listed] == [(str(made.id), "Morning headlines")]
    # A retry of the same request (null instead of an omitted id is the same request) makes nothing again.
    again = create(owner_client, {**data, "conversation_id": None, "new_conversation": True})
    assert again == send(owner_client, "get", detail(task["id"])).json()
    assert conversations() == [("Morning headlines", True)]
    # The same id for the same task in an existing conversation is another request.
    assert_error(send(owner_client, "post", LIST, {**data, "conversation_id": str(made.id)}), 409, "id_conflict")


@pytest.mark.parametrize(
    ("change", "status", "code"),
    [
        ({"schedule": {"kind": "once", "at": "2020-01-01T00:00:00Z"}}, 400, "invalid_schedule"),
        ({"schedule": {"kind": "cron", "expression": "0 25 * * *"}}, 400, "invalid_schedule"),
        ({"name": "   "}, 400, "invalid_task"),
        ({"instructions": ""}, 400, "invalid_task"),
    ],
)
def test_a_refused_task_creates_no_conversation(
    owner_client: Client, db: None, change: dict, status: int, code: str
) -> None:
    data = {**body(uuid.uuid4(), **change), "conversation_id": None, "new_conversation": True}
    assert_error(send(owner_client, "post", LIST, data), status, code)
    assert conversations() == []
    assert rows() == []


def test_a_task_refused_by_the_limit_or_a_taken_id_creates_no_conversation(
    owner_client: Client, conversation: Conversation
) -> None:
    deleted = create(owner_client, body(conversation, name="Gone"))
    assert send(owner_client, "delete", detail(deleted["id"]) + "?expected_version=1").status_code == 204
    fresh = {**body(uuid.uuid4()), "conversation_id": None, "new_conversation": True}
    assert_error(send(owner_client, "post", LIST, {**fresh, "id": deleted["id"]}), 409, "id_conflict")
    for n in range(100):
        create(owner_client, body(conversation, name=f"Task {n}"))
    assert_error(send(owner_client, "post", LIST, fresh), 429, "task_limit")
    assert conversations() == [("Reports", True)]
    assert Task.objects.filter(state=TaskState.ACTIVE).count() == 100


def test_it_needs_exactly_one_conversation(owner_client: Client, conversation: Conversation) -> None:
    choose = "Choose the conversation the task sends its instructions to, or ask for a new one."
    data = body(conversation)
    without = {k: v for k, v in data.items() if k != "conversation_id"}
    for sent, field, message in (
        (without, "conversation_id", choose),
        ({**without, "conversation_id": None}, "conversation_id", choose),
        ({**without, "new_conversation": False}, "conversation_id", choose),
        (
            {**without, "new_conversation": "yes"},
            "new_conversation",
            "Whether the task gets a new conversation must be true or false.",
        ),
        (
            {**data, "new_conversation": True},
            "conversation_id",
            "Give a conversation or ask for a new one, not both.",
        ),
    ):
        error = assert_error(send(owner_client, "post", LIST, sent), 400, "invalid")
        assert (error["message"], error["fields"]) == (message, {field: [message]})
    assert rows() == []
    assert conversations() == [("Reports", True)]
    # An existing conversation, said either way.
    assert create(owner_client, {**data, "new_conversation": False})["conversation_id"] == str(conversation.id)


# ---- errors in words --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "code", "field", "message"),
    [
        (
            {"schedule": {"kind": "cron", "expression": "0 25 * * *", "timezone": "Europe/Berlin"}},
            "invalid_schedule",
            "schedule.expression",
            "The hour 25 is outside 0-23.",
        ),
        (
            {"schedule": {"kind": "cron", "expression": "0 9 * * 1", "timezone": "Nowhere/City"}},
            "invalid_schedule",
            "schedule.timezone",
            "The time zone “Nowhere/City” is not an IANA time zone; give one such as Europe/Berlin or UTC.",
        ),
        (
            {"schedule": {"kind": "once", "at": "2020-01-01T00:00:00Z"}},
            "invalid_schedule",
            "schedule.at",
            "The time of a one-off must be in the future.",
        ),
        ({"name": "n" * 121}, "invalid_task", "name", "The name must be 1-120 characters long."),
        ({"instructions": " "}, "invalid_task", "instructions", "The instructions must not be blank."),
        ({"enabled": "yes"}, "invalid_task", "enabled", "Whether the task is enabled must be true or false."),
        (
            {"notify_on_completion": "yes"},
            "invalid_task",
            "notify_on_completion",
            "Whether a completed run notifies you must be true or false.",
        ),
        (
            {"conversation_id": "x"},
            "invalid_id",
            "conversation_id",
            "The conversation id is not a valid id (a lowercase UUID).",
        ),
    ],
)
def test_refusals_say_what_is_wrong_in_words_and_name_the_field_beside(
    owner_client: Client, conversation: Conversation, change: dict, code: str, field: str, message: str
) -> None:
    error = assert_error(send(owner_client, "post", LIST, body(conversation, **change)), 400, code)
    assert error == {"code": code, "message": message, "fields": {field: [message]}}
    assert "`" not in message


def test_notify_me_is_an_optional_switch_old_clients_never_see_move(
    owner_client: Client, conversation: Conversation
) -> None:
    old = create(owner_client, body(conversation))
    assert old["notify_on_completion"] is False
    on = create(owner_client, body(conversation, notify_on_completion=True))
    assert on["notify_on_completion"] is True

    kept = send(owner_client, "put", detail(on["id"]), edit(on, name="Renamed"))
    assert kept.status_code == 200, kept.content
    assert kept.json()["notify_on_completion"] is True
    off = send(owner_client, "put", detail(on["id"]), edit(kept.json(), notify_on_completion=False))
    assert off.json()["notify_on_completion"] is False
    assert Task.objects.get(id=on["id"]).notify_on_completion is False


def test_a_refused_cron_says_what_is_accepted_without_code_marks(
    owner_client: Client, conversation: Conversation
) -> None:
    schedule = {"kind": "cron", "expression": "0 9 * * MONDAY", "timezone": "UTC"}
    error = assert_error(
        send(owner_client, "post", LIST, body(conversation, schedule=schedule)), 400, "invalid_schedule"
    )
    assert error["message"].startswith(
        "The day of the week “MONDAY” is not a day's name (SUN-SAT); a cron expression has five fields"
    )
    assert "MON-FRI" in error["message"]
    assert "`" not in error["message"]
    assert not re.search(r"schedule\.|expression:", error["message"])
    task = create(owner_client, body(conversation))
    bad = edit(task, schedule={"kind": "cron", "expression": "61 * * * *", "timezone": "UTC"})
    error = assert_error(send(owner_client, "put", detail(task["id"]), bad), 400, "invalid_schedule")
    assert error["message"] == "The minute 61 is outside 0-59."


# ---- one-offs keep their zone; next runs in a zone -----------------------------------


def test_a_one_off_keeps_its_zone_for_showing_and_editing(owner_client: Client, conversation: Conversation) -> None:
    at = (timezone.now() + timedelta(days=3)).replace(second=0, microsecond=0)
    written = at.astimezone(ZoneInfo("Europe/Berlin")).isoformat()
    schedule = {"kind": "once", "at": written, "timezone": "Europe/Berlin"}
    task = create(owner_client, body(conversation, schedule=schedule))
    assert task["schedule"] == {"kind": "once", "at": iso(at), "timezone": "Europe/Berlin"}
    local = at.astimezone(ZoneInfo("Europe/Berlin"))
    assert task["schedule_text"] == f"Once, {local:%a} {local.day} {local:%b %Y} at {local:%H:%M}, Europe/Berlin"
    assert task["next_run_at"] == iso(at)
    # Sent back as it was read, it is unchanged; another zone moves only how it is shown.
    same = send(owner_client, "put", detail(task["id"]), edit(task)).json()
    assert same["schedule"] == task["schedule"]
    moved = send(
        owner_client, "put", detail(task["id"]), edit(same, schedule={**same["schedule"], "timezone": "Asia/Tokyo"})
    ).json()
    assert moved["schedule"] == {"kind": "once", "at": iso(at), "timezone": "Asia/Tokyo"}
    assert moved["next_run_at"] == iso(at)
    assert moved["schedule_text"].endswith(f"at {at.astimezone(ZoneInfo('Asia/Tokyo')):%H:%M}, Asia/Tokyo")
    # Without a zone, a one-off is in UTC.
    plain = create(owner_client, body(conversation, schedule={"kind": "once", "at": iso(at)}))
    assert plain["schedule"] == {"kind": "once", "at": iso(at), "timezone": "UTC"}


def next_change_in_berlin() -> datetime:
    """Noon of the day Berlin next changes its offset (the last Sunday of March or October), not a month's last day."""
    berlin = ZoneInfo("Europe/Berlin")
    day = timezone.now().astimezone(berlin).replace(hour=12, minute=0, second=0, microsecond=0) + timedelta(days=2)
    while True:
        after = day + timedelta(days=1)
        # A change on the 31st is skipped for the next one: the day after it is in another month.
        if day.utcoffset() != after.utcoffset() and (after + timedelta(days=1)).month == after.month:
            return after
        day = after


def test_the_next_runs_keep_their_wall_clock_across_berlins_next_change(
    owner_client: Client, conversation: Conversation
) -> None:
    change = next_change_in_berlin()
    days = ",".join(str((change + timedelta(days=n)).day) for n in (-1, 0, 1))
    expression = f"30 2 {days} {change.month} *"
    schedule = {"kind": "cron", "expression": expression, "timezone": "Europe/Berlin"}
    task = create(owner_client, body(conversation, schedule=schedule))
    assert task["schedule_text"] == f"Cron {expression}, Europe/Berlin"
    berlin = ZoneInfo("Europe/Berlin")
    shown = [
        datetime.fromisoformat(at.replace("Z", "+00:00")).astimezone(berlin).strftime("%d %H:%M")
        for at in task["upcoming"][:3]
    ]
    spring = change.month == 3
    # In spring 02:30 is skipped on the day of the change and runs at 03:00; in autumn it
    # happens twice and runs once, at its first occurrence.
    middle = "03:00" if spring else "02:30"
    assert shown == [
        f"{(change + timedelta(days=n)).day:02d} {t}" for n, t in ((-1, "02:30"), (0, middle), (1, "02:30"))
    ]
    offsets = [
        datetime.fromisoformat(at.replace("Z", "+00:00")).astimezone(berlin).utcoffset() for at in task["upcoming"][:3]
    ]
    assert offsets[0] != offsets[2]


@pytest.mark.parametrize(
    ("change", "status", "code"),
    [
        ({"name": "n" * 121}, 400, "invalid_task"),
        ({"name": "😀" * 61}, 400, "invalid_task"),  # 122 UTF-16 code units
        ({"name": "   "}, 400, "invalid_task"),
        ({"name": ""}, 400, "invalid_task"),
        ({"name": "a\u202eb"}, 400, "invalid_task"),
        ({"name": "a\nb"}, 400, "invalid_task"),
        ({"name": 5}, 400, "invalid_task"),
        ({"instructions": "i" * 8001}, 400, "invalid_task"),
        ({"instructions": "  \n "}, 400, "invalid_task"),
        ({"instructions": "a\x00b"}, 400, "invalid_task"),
        ({"enabled": "true"}, 400, "invalid_task"),
        ({"enabled": 1}, 400, "invalid_task"),
        ({"schedule": {"kind": "once", "at": "2020-01-01T00:00:00Z"}}, 400, "invalid_schedule"),
        ({"schedule": {"kind": "cron", "expression": "0 9 * * MONDAY"}}, 400, "invalid_schedule"),
        (
            {"schedule": {"kind": "cron", "expression": "0 9 * * 1", "timezone": "Nowhere/City"}},
            400,
            "invalid_schedule",
        ),
        ({"id": "NOT-A-UUID"}, 400, "invalid_id"),
        ({"id": str(uuid.uuid4()).upper()}, 400, "invalid_id"),
        ({"conversation_id": "x"}, 400, "invalid_id"),
        ({"extra": 1}, 400, "invalid"),
    ],
)
def test_it_refuses_invalid_tasks_and_writes_nothing(
    owner_client: Client, conversation: Conversation, change: dict, status: int, code: str
) -> None:
    assert_error(send(owner_client, "post", LIST, body(conversation, **change)), status, code)
    assert rows() == []
    assert PeriodicTask.objects.filter(name__startswith="flarebot task").count() == 0


def test_it_refuses_a_body_that_misses_a_field(owner_client: Client, conversation: Conversation) -> None:
    for field in ("id", "conversation_id", "name", "instructions", "schedule", "enabled"):
        data = body(conversation)
        del data[field]
        assert_error(send(owner_client, "post", LIST, data), 400, "invalid")
    assert_error(send(owner_client, "post", LIST, ["not", "an", "object"]), 400, "invalid")
    assert rows() == []


def test_it_takes_names_and_instructions_at_their_limits(owner_client: Client, conversation: Conversation) -> None:
    task = create(owner_client, body(conversation, name="n" * 120, instructions="i" * 8000))
    assert (len(task["name"]), len(task["instructions"])) == (120, 8000)
    assert create(owner_client, body(conversation, name="  padded  "))["name"] == "padded"


def test_it_holds_at_most_100_active_tasks(owner_client: Client, conversation: Conversation) -> None:
    made = [create(owner_client, body(conversation, name=f"Task {n}")) for n in range(100)]
    error = assert_error(send(owner_client, "post", LIST, body(conversation)), 429, "task_limit")
    assert "100" in error["message"]
    assert Task.objects.filter(state=TaskState.ACTIVE).count() == 100
    # A deleted task makes room; its tombstone does not count.
    response = send(owner_client, "delete", detail(made[0]["id"]) + "?expected_version=1")
    assert response.status_code == 204
    create(owner_client, body(conversation))


# ---- updating -------------------------------------------------------------------------


def test_it_replaces_the_editable_fields_and_rearms_beat(owner_client: Client, conversation: Conversation) -> None:
    task = create(owner_client, body(conversation))
    old = periodic(task["id"])
    change = edit(task, name="Daily", schedule={"kind": "cron", "expression": "30 7 * * *", "timezone": "Asia/Tokyo"})
    response = send(owner_client, "put", detail(task["id"]), change)
    assert response.status_code == 200, response.content
    updated = response.json()
    assert (updated["name"], updated["version"], updated["conversation_id"]) == ("Daily", 2, task["conversation_id"])
    assert updated["schedule"] == {"kind": "cron", "expression": "30 7 * * *", "timezone": "Asia/Tokyo"}
    held = periodic(task["id"])
    assert held is not None
    assert old is not None
    # The same row pair, moved: beat never loses a row it holds.
    assert (held.pk, held.clocked_id, held.enabled) == (old.pk, old.clocked_id, True)
    assert held.clocked.clocked_time != old.clocked.clocked_time
    assert ClockedSchedule.objects.filter(periodictask__name__startswith="flarebot task").count() == 1
    assert updated["next_run_at"] == held.clocked.clocked_time.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert datetime.fromisoformat(updated["next_run_at"].replace("Z", "+00:00")).strftime("%H:%M") == "22:30"


def test_it_refuses_a_stale_version_with_the_task_as_it_is(owner_client: Client, conversation: Conversation) -> None:
    task = create(owner_client, body(conversation))
    current = send(owner_client, "put", detail(task["id"]), edit(task, name="First")).json()
    error = assert_error(
        send(owner_client, "put", detail(task["id"]), edit(task, name="Second")), 409, "version_conflict"
    )
    assert error["current"] == current
    assert send(owner_client, "get", detail(task["id"])).json()["name"] == "First"


def test_it_never_creates_a_task_by_updating(owner_client: Client, conversation: Conversation) -> None:
    task = create(owner_client, body(conversation))
    assert_error(send(owner_client, "put", detail(uuid.uuid4()), edit(task)), 404, "not_found")
    for bad in (
        {"expected_version": "1"},
        {"expected_version": 0},
        {"expected_version": True},
        {"conversation_id": "x"},
    ):
        assert_error(send(owner_client, "put", detail(task["id"]), edit(task, **bad)), 400)
    assert send(owner_client, "get", detail(task["id"])).json()["version"] == 1


def test_a_disabled_task_has_no_next_run_and_beat_holds_nothing(
    owner_client: Client, conversation: Conversation
) -> None:
    task = create(owner_client, body(conversation))
    disabled = send(owner_client, "put", detail(task["id"]), edit(task, enabled=False)).json()
    assert (disabled["enabled"], disabled["next_run_at"], disabled["upcoming"]) == (False, None, [])
    assert periodic(task["id"]).enabled is False
    enabled = send(owner_client, "put", detail(task["id"]), edit(disabled, enabled=True)).json()
    assert enabled["next_run_at"] == task["next_run_at"]


def test_a_one_off_that_ran_stays_done_until_given_a_new_instant(
    owner_client: Client, conversation: Conversation
) -> None:
    task = create(owner_client, body(conversation, schedule={"kind": "once", "at": future(30)}))
    assert (task["next_run_at"], task["upcoming"]) == (task["schedule"]["at"], [task["schedule"]["at"]])
    # Time passes: the one-off is due now (beat's clocked row moves with it, as arming would).
    due = timezone.now().replace(microsecond=0) - timedelta(seconds=1)
    at = due.strftime("%Y-%m-%dT%H:%M:%SZ")
    Task.objects.filter(id=task["id"]).update(once_at=due, armed_at=due)
    stored = Task.objects.get(id=task["id"])
    assert runs.task_fire(task_id=stored.id, intended_at=stored.armed_at) is not None
    ran = send(owner_client, "get", detail(task["id"])).json()
    assert (ran["next_run_at"], ran["upcoming"]) == (None, [])
    assert ran["previous_run"]["intended_at"] == at
    # The unchanged instant is accepted (it is past now, in effect) and the task stays done.
    renamed = send(owner_client, "put", detail(task["id"]), edit(ran, name="Renamed")).json()
    assert (renamed["name"], renamed["next_run_at"], renamed["upcoming"]) == ("Renamed", None, [])
    past = edit(renamed, schedule={"kind": "once", "at": "2020-01-01T00:00:00Z"})
    assert_error(send(owner_client, "put", detail(task["id"]), past), 400, "invalid_schedule")
    again = future(90)
    rearmed = send(
        owner_client, "put", detail(task["id"]), edit(renamed, schedule={"kind": "once", "at": again})
    ).json()
    assert (rearmed["next_run_at"], rearmed["upcoming"]) == (again, [again])


# ---- deleting --------------------------------------------------------------------------


def test_it_deletes_a_task_leaving_a_tombstone_without_history(
    owner_client: Client, conversation: Conversation
) -> None:
    task = create(owner_client, body(conversation))
    run = send(owner_client, "post", runs_url(task["id"]), {"request_id": str(uuid.uuid4())}).json()
    assert_error(send(owner_client, "delete", detail(task["id"])), 400, "invalid_version")
    assert_error(send(owner_client, "delete", detail(task["id"]) + "?expected_version=2"), 409, "version_conflict")
    assert_error(send(owner_client, "delete", detail(task["id"]) + "?expected_version=01"), 400, "invalid_version")
    response = send(owner_client, "delete", detail(task["id"]) + "?expected_version=1")
    assert response.status_code == 204
    tombstone = Task.objects.get(id=task["id"])
    assert (tombstone.state, tombstone.name, tombstone.instructions, tombstone.conversation_id) == (
        TaskState.DELETED,
        "",
        "",
        None,
    )
    assert tombstone.cron_expression == tombstone.timezone == tombstone.creation_hash == ""
    assert not TaskRun.objects.filter(task_id=task["id"]).exists()
    assert periodic(task["id"]).enabled is False  # removed by reconciliation once beat cannot be reading it
    assert_error(send(owner_client, "get", detail(task["id"])), 404, "not_found")
    assert send(owner_client, "get", LIST).json() == {"tasks": []}
    # The conversation and the run's message stay.
    assert Conversation.objects.filter(id=conversation.id).exists()
    assert Message.objects.filter(turn_id=run["turn_id"]).exists()
    # Done already, and never revived by a retried creation.
    assert send(owner_client, "delete", detail(task["id"]) + "?expected_version=1").status_code == 204
    assert_error(send(owner_client, "post", LIST, body(conversation, id=task["id"])), 409, "id_conflict")


def test_deleting_an_absent_id_reserves_it(owner_client: Client, conversation: Conversation) -> None:
    task_id = str(uuid.uuid4())
    assert send(owner_client, "delete", detail(task_id) + "?expected_version=1").status_code == 204
    assert_error(send(owner_client, "post", LIST, body(conversation, id=task_id)), 409, "id_conflict")
    assert_error(send(owner_client, "delete", detail("nope") + "?expected_version=1"), 400, "invalid_id")


def test_deleting_the_conversation_removes_its_tasks_at_once_and_tombstones_them(
    owner_client: Client, conversation: Conversation
) -> None:
    other = conversation_create(name="Other")
    doomed = create(owner_client, body(conversation))
    kept = create(owner_client, body(other))
    conversation_delete(conversation_id=conversation.id)
    assert [t["id"] for t in send(owner_client, "get", LIST).json()["tasks"]] == [kept["id"]]
    assert_error(send(owner_client, "get", detail(doomed["id"])), 404)
    from conversations.services import conversation_teardown

    assert conversation_teardown(conversation_id=conversation.id)
    assert Task.objects.get(id=doomed["id"]).state == TaskState.DELETED
    assert periodic(doomed["id"]).enabled is False
    assert Task.objects.get(id=kept["id"]).state == TaskState.ACTIVE
    assert_error(send(owner_client, "post", LIST, body(conversation, id=doomed["id"])), 409, "id_conflict")


# ---- runs ------------------------------------------------------------------------------


def test_run_now_submits_a_marked_turn_once_per_request(owner_client: Client, conversation: Conversation) -> None:
    task = create(owner_client, body(conversation, enabled=False))
    request_id = str(uuid.uuid4())
    response = send(owner_client, "post", runs_url(task["id"]), {"request_id": request_id})
    assert response.status_code == 202, response.content
    run = response.json()
    assert set(run) == R_FIELDS
    assert (run["source"], run["status"], run["conversation_id"], run["missed_count"]) == (
        "manual",
        "pending",
        str(conversation.id),
        1,
    )
    assert run["turn_id"] is not None
    [message] = Message.objects.filter(turn_id=run["turn_id"])
    assert message.role == "user"
    assert message.parts == [
        {
            "type": "text",
            "text": "Summarise what I asked you this week.",
            "source": {"kind": "task", "task_id": task["id"], "run_id": run["id"], "name": "Weekly summary"},
        }
    ]
    again = send(owner_client, "post", runs_url(task["id"]), {"request_id": request_id})
    assert again.status_code == 202
    assert again.json() == run
    assert TaskRun.objects.count() == 1
    # It neither consumes nor shifts the schedule (a disabled one stays without one).
    assert send(owner_client, "get", detail(task["id"])).json()["next_run_at"] is None
    assert send(owner_client, "get", detail(task["id"])).json()["previous_run"] == run


def test_run_now_refuses_bad_requests(owner_client: Client, conversation: Conversation) -> None:
    task = create(owner_client, body(conversation))
    assert_error(send(owner_client, "post", runs_url(task["id"]), {}), 400, "invalid")
    assert_error(send(owner_client, "post", runs_url(task["id"]), {"request_id": "x"}), 400, "invalid_id")
    assert_error(send(owner_client, "post", runs_url(task["id"]), {"request_id": str(uuid.uuid4()), "x": 1}), 400)
    assert_error(send(owner_client, "post", runs_url(uuid.uuid4()), {"request_id": str(uuid.uuid4())}), 404)
    assert TaskRun.objects.count() == 0


def test_history_pages_newest_first_with_a_keyset_cursor(owner_client: Client, conversation: Conversation) -> None:
    task = create(owner_client, body(conversation))
    stored = Task.objects.get(id=task["id"])
    base = timezone.now() - timedelta(days=1)
    made = []
    for n in range(130):
        run = TaskRun.objects.create(
            task=stored,
            occurrence=f"m:{stored.id}:{n}",
            source="manual",
            intended_at=base,
            task_version=1,
            status=RunStatus.COMPLETED,
            request_id=uuid.uuid4(),
            conversation_id=conversation.id,
        )
        # Pairs share a creation time: the id breaks the tie.
        TaskRun.objects.filter(id=run.id).update(created_at=base + timedelta(seconds=n // 2))
        made.append(run.id)
    expected = [
        str(r) for r in TaskRun.objects.filter(task=stored).order_by("-created_at", "-id").values_list("id", flat=True)
    ]
    first = send(owner_client, "get", runs_url(task["id"])).json()
    assert [r["id"] for r in first["runs"]] == expected[:25]
    seen, cursor = [r["id"] for r in first["runs"]], first["next_cursor"]
    while cursor:
        page = send(owner_client, "get", runs_url(task["id"]) + f"?limit=100&before={cursor}").json()
        seen += [r["id"] for r in page["runs"]]
        cursor = page["next_cursor"]
    assert seen == expected
    full = send(owner_client, "get", runs_url(task["id"]) + "?limit=100").json()
    assert len(full["runs"]) == 100
    for bad in ("0", "101", "-1", "1.5", "ten", "", "٣"):
        assert_error(send(owner_client, "get", runs_url(task["id"]) + f"?limit={bad}"), 400, "invalid_limit")
    for bad in ("x", "AAAA", "a" * 300):
        assert_error(send(owner_client, "get", runs_url(task["id"]) + f"?before={bad}"), 400, "invalid_cursor")
    assert_error(send(owner_client, "get", runs_url(uuid.uuid4())), 404)


def test_every_route_needs_the_owner(anonymous_client: Client, owner: object, conversation: Conversation) -> None:
    for method, path in (("get", LIST), ("post", LIST), ("get", detail(uuid.uuid4())), ("get", runs_url(uuid.uuid4()))):
        response = send(anonymous_client, method, path, {} if method == "post" else None)
        assert response.status_code == 401


def test_services_refuse_before_touching_a_row(conversation: Conversation) -> None:
    with pytest.raises(services.TaskInvalid):
        services.task_input_clean(
            name="", instructions="x", schedule={"kind": "cron", "expression": "0 9 * * 1"}, enabled=True
        )
    assert rows() == []
