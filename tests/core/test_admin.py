"""The Django admin: the owner's, read-only for conversations, signed in only through /login/."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from conversations.models import Conversation
from flarebot.core.sessions import AUTH_AT_KEY, INSTALLATION_KEY
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME

CHANGELIST = "/admin/conversations/conversation/"
ADMIN_TITLE = b"Flarebot administration"


def test_it_shows_the_admin_to_the_owner(owner_client):
    response = owner_client.get("/admin/")

    assert response.status_code == 200
    assert ADMIN_TITLE in response.content
    assert CHANGELIST.encode() in response.content


def test_it_lists_conversations(owner_client):
    Conversation.objects.create(name="Holiday plans")

    response = owner_client.get(CHANGELIST)

    assert response.status_code == 200
    assert b"Holiday plans" in response.content


def test_it_does_not_let_the_owner_add_a_conversation(owner_client):
    response = owner_client.post(f"{CHANGELIST}add/", {"name": "Added", "state": "active"})

    assert owner_client.get(f"{CHANGELIST}add/").status_code == 403
    assert response.status_code == 403
    assert not Conversation.objects.exists()


def test_it_does_not_let_the_owner_delete_a_conversation(owner_client):
    conversation = Conversation.objects.create(name="Holiday plans")

    response = owner_client.post(f"{CHANGELIST}{conversation.id}/delete/", {"post": "yes"})

    assert response.status_code == 403
    assert Conversation.objects.get().state == "active"


def test_it_shows_a_conversation_without_letting_the_owner_change_it(owner_client):
    conversation = Conversation.objects.create(name="Holiday plans")

    page = owner_client.get(f"{CHANGELIST}{conversation.id}/change/")
    response = owner_client.post(f"{CHANGELIST}{conversation.id}/change/", {"name": "Changed", "state": "deleting"})

    assert page.status_code == 200
    assert b"Holiday plans" in page.content
    assert b'name="_save"' not in page.content
    assert response.status_code == 403
    conversation.refresh_from_db()
    assert (conversation.name, conversation.state) == ("Holiday plans", "active")


def test_it_sends_the_admin_sign_in_to_flarebots_sign_in_page(owner, anonymous_client):
    page = anonymous_client.get("/admin/login/")
    attempt = anonymous_client.post("/admin/login/", {"username": OWNER_USERNAME, "password": OWNER_PASSWORD})

    assert page.status_code == 302
    assert page["Location"] == "/login/?next=/admin/"
    assert attempt.status_code == 302
    assert attempt["Location"] == "/login/?next=/admin/"
    assert anonymous_client.get("/admin/").status_code == 302


def test_it_does_not_show_the_admin_when_signed_out(owner, anonymous_client):
    response = anonymous_client.get("/admin/", follow=True)

    assert ADMIN_TITLE not in response.content
    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == "/login/?next=/admin/"
    assert b'name="password"' in response.content


def test_it_does_not_show_the_admin_to_another_superuser(owner, origin):
    other = get_user_model().objects.create_superuser(username="root", password="a-root-passphrase-99")
    client = Client(headers={"Origin": origin})
    client.force_login(other)
    session = client.session
    session[AUTH_AT_KEY] = timezone.now().timestamp()
    session[INSTALLATION_KEY] = str(owner.installation_id)
    session.save()

    response = client.get("/admin/")

    assert response.status_code == 302
    assert ADMIN_TITLE not in response.content
    assert client.get(CHANGELIST).status_code == 302


def user_change_form(user) -> dict[str, str]:
    """What the admin's user change form posts for this user, fields unchanged."""
    return {
        "username": user.username,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "email": user.email,
        **({"is_active": "on"} if user.is_active else {}),
        **({"is_staff": "on"} if user.is_staff else {}),
        **({"is_superuser": "on"} if user.is_superuser else {}),
        "last_login_0": "",
        "last_login_1": "",
        "date_joined_0": user.date_joined.strftime("%Y-%m-%d"),
        "date_joined_1": user.date_joined.strftime("%H:%M:%S"),
        "_save": "Save",
    }


def test_it_does_not_let_the_admin_change_what_identifies_the_owner(owner, owner_client):
    user = owner.owner
    path = f"/admin/auth/user/{user.pk}/change/"
    changed = {**user_change_form(user), "username": "intruder", "first_name": "Ada", "email": "ada@example.org"}
    for flag in ("is_active", "is_staff", "is_superuser"):
        changed.pop(flag)

    page = owner_client.get(path)
    response = owner_client.post(path, changed)

    assert response.status_code == 302, response.content
    user.refresh_from_db()
    assert (user.username, user.is_active, user.is_staff, user.is_superuser) == (OWNER_USERNAME, True, True, True)
    assert (user.first_name, user.email) == ("Ada", "ada@example.org")
    assert owner_client.get("/api/conversations/").status_code == 200
    assert owner_client.get("/admin/").status_code == 200
    assert page.status_code == 200
    assert b'name="username"' not in page.content


def test_it_still_lets_the_admin_rename_another_user(owner, owner_client):
    other = get_user_model().objects.create_user(username="guest", password="a-guest-passphrase-77")

    response = owner_client.post(
        f"/admin/auth/user/{other.pk}/change/", {**user_change_form(other), "username": "visitor"}
    )

    assert response.status_code == 302, response.content
    other.refresh_from_db()
    assert other.username == "visitor"
    assert owner_client.get("/api/conversations/").status_code == 200


@pytest.mark.parametrize("path", ["/admin/password_change/", "/admin/password_change/done/", "{user}/password/"])
def test_the_admins_password_forms_lead_to_settings_where_wrong_passwords_are_throttled(owner, owner_client, path):
    user = get_user_model().objects.get(pk=owner.owner_id)
    url = path.format(user=f"/admin/auth/user/{user.pk}")
    before = user.password

    shown = owner_client.get(url)
    tried = owner_client.post(url, {"old_password": "guess", "new_password1": "x" * 20, "new_password2": "x" * 20})

    assert (shown.status_code, shown["Location"]) == (302, "/settings/#account")
    assert (tried.status_code, tried["Location"]) == (302, "/settings/#account")
    user.refresh_from_db()
    assert user.password == before
