"""The core's system checks refuse settings that would break the owner-session rules."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from flarebot.core.checks import session_engine_check


def test_the_settings_pass_the_session_engine_check() -> None:
    assert session_engine_check() == []


@override_settings(SESSION_ENGINE="django.contrib.sessions.backends.cache")
def test_another_session_engine_stops_the_server_from_starting() -> None:
    errors = session_engine_check()
    assert [error.id for error in errors] == ["core.E001"]

    with pytest.raises(SystemCheckError, match=r"core\.E001"):
        call_command("check")
