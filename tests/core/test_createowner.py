"""`manage.py createowner`: exactly one owner, a strong password, never a silent prompt."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from flarebot.core.env import BASE_DIR
from flarebot.core.models import Installation

pytestmark = pytest.mark.database

PASSWORD = "correct-horse-battery-staple"


def test_it_creates_the_owner_and_the_installation(db, monkeypatch, capsys):
    monkeypatch.setenv("FLAREBOT_OWNER_PASSWORD", PASSWORD)

    call_command("createowner", username="alice")

    user = get_user_model().objects.get()
    assert user.username == "alice"
    assert user.is_staff
    assert user.is_superuser
    assert user.is_active
    assert user.check_password(PASSWORD)
    installation = Installation.objects.get()
    assert installation.owner == user
    assert installation.owner_username == "alice"
    assert installation.schema_version == settings.FLAREBOT_SCHEMA_VERSION
    assert "'alice' created" in capsys.readouterr().out


def test_it_lets_the_new_owner_sign_in(db, monkeypatch, origin):
    monkeypatch.setenv("FLAREBOT_OWNER_PASSWORD", PASSWORD)
    call_command("createowner", username="alice")
    client = Client(headers={"Origin": origin})

    assert client.post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 302
    assert client.get("/api/conversations/").status_code == 200


@pytest.mark.parametrize("username", ["alice", "bob"])
def test_it_refuses_a_second_owner_and_changes_nothing(db, monkeypatch, username):
    monkeypatch.setenv("FLAREBOT_OWNER_PASSWORD", PASSWORD)
    call_command("createowner", username="alice")
    installation = Installation.objects.get()
    monkeypatch.setenv("FLAREBOT_OWNER_PASSWORD", "another-long-passphrase-9")

    with pytest.raises(CommandError, match="already has an owner"):
        call_command("createowner", username=username)

    assert list(get_user_model().objects.values_list("username", flat=True)) == ["alice"]
    assert get_user_model().objects.get().check_password(PASSWORD)
    assert list(Installation.objects.values_list("installation_id", flat=True)) == [installation.installation_id]


def test_it_refuses_a_username_that_is_already_taken(db, monkeypatch):
    get_user_model().objects.create_user(username="alice", password="an-older-passphrase-1")
    monkeypatch.setenv("FLAREBOT_OWNER_PASSWORD", PASSWORD)

    with pytest.raises(CommandError, match="already exists"):
        call_command("createowner", username="alice")

    assert not Installation.objects.exists()
    assert not get_user_model().objects.get().is_superuser


@pytest.mark.parametrize(
    ("password", "message"),
    [
        ("xK9#mQ2$vL7", "at least 12 characters"),
        ("password1234", "too common"),
        ("804217395561", "entirely numeric"),
        ("alexandria12", "too similar to the username"),
    ],
)
def test_it_refuses_a_weak_password(db, monkeypatch, password, message):
    monkeypatch.setenv("FLAREBOT_OWNER_PASSWORD", password)

    with pytest.raises(CommandError, match=message):
        call_command("createowner", username="alexandria")

    assert not get_user_model().objects.exists()
    assert not Installation.objects.exists()


def test_it_accepts_a_password_of_exactly_twelve_characters(db, monkeypatch):
    monkeypatch.setenv("FLAREBOT_OWNER_PASSWORD", "xK9#mQ2$vL7w")

    call_command("createowner", username="alice")

    assert Installation.objects.get().owner_username == "alice"


def test_it_refuses_a_blank_username(db, monkeypatch):
    monkeypatch.setenv("FLAREBOT_OWNER_PASSWORD", PASSWORD)

    with pytest.raises(CommandError, match="1-150 characters"):
        call_command("createowner", username="   ")

    assert not get_user_model().objects.exists()


def manage(*args: str, data_dir, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run manage.py as the README's user does, on this data dir (SQLite), with no password set."""
    env = {key: value for key, value in os.environ.items() if key not in {"FLAREBOT_OWNER_PASSWORD", "DATABASE_URL"}}
    env.update(DJANGO_SETTINGS_MODULE="flarebot.settings", FLAREBOT_DATA_DIR=str(data_dir), **extra)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_needs_the_password_from_the_environment_or_a_terminal(tmp_path):
    assert manage("migrate", "-v0", data_dir=tmp_path).returncode == 0

    result = manage("createowner", "--username", "alice", data_dir=tmp_path)

    assert result.returncode == 1
    assert "Set FLAREBOT_OWNER_PASSWORD or run createowner in a terminal." in result.stderr
    assert "Traceback" not in result.stderr


def test_it_says_which_data_dir_it_used_and_creates_nothing_where_make_run_never_ran(tmp_path):
    data_dir = tmp_path / "not-the-one-make-run-used"

    result = manage("createowner", "--username", "alice", data_dir=data_dir, FLAREBOT_OWNER_PASSWORD=PASSWORD)

    assert result.returncode == 1
    assert f"No Flarebot installation was found in the data dir {data_dir}" in result.stderr
    assert "FLAREBOT_DATA_DIR" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not data_dir.exists()  # no second data dir, no new secret


def test_it_creates_nothing_in_a_data_dir_without_a_database(tmp_path):
    (tmp_path / "logs").mkdir()

    result = manage("createowner", "--username", "alice", data_dir=tmp_path, FLAREBOT_OWNER_PASSWORD=PASSWORD)

    assert result.returncode == 1
    assert f"No Flarebot installation was found in the data dir {tmp_path} (it has no database)" in result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["logs"]


def test_it_refuses_a_database_without_flarebots_tables(tmp_path):
    (tmp_path / "flarebot.sqlite3").write_bytes(b"")

    result = manage("createowner", "--username", "alice", data_dir=tmp_path, FLAREBOT_OWNER_PASSWORD=PASSWORD)

    assert result.returncode == 1
    assert "its database has no Flarebot tables" in result.stderr
    assert str(tmp_path) in result.stderr
    assert "Traceback" not in result.stderr
    with sqlite3.connect(tmp_path / "flarebot.sqlite3") as database:
        assert database.execute("SELECT name FROM sqlite_master").fetchall() == []


def test_it_says_where_it_created_the_owner(tmp_path):
    assert manage("migrate", "-v0", data_dir=tmp_path).returncode == 0

    result = manage("createowner", "--username", "alice", data_dir=tmp_path, FLAREBOT_OWNER_PASSWORD=PASSWORD)

    assert result.returncode == 0, result.stderr
    assert f"Owner 'alice' created in the data dir {tmp_path}" in result.stdout
