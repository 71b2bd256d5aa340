"""API tokens: shown once, stored hashed, revocable, every change journaled."""

import hashlib
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.utils import timezone
from freezegun import freeze_time

from lifecycle.models import ApiToken, JournalEvent
from lifecycle.services.tokens import (
    InvalidToken,
    TokenNotFound,
    token_create,
    token_for_key,
    token_revoke,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    # The personas log in with real passwords; the default hasher costs ~0.3 s a user.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def stored_values(token: ApiToken) -> list[str]:
    return [str(getattr(token, f.attname)) for f in ApiToken._meta.concrete_fields]


def test_a_token_is_stored_as_its_sha256_only():
    issued = token_create(name="repair-bot", role="agent", actor="cli")

    token = ApiToken.objects.get(name="repair-bot")
    assert token.key_hash == hashlib.sha256(issued.key.encode()).hexdigest()
    assert not any(issued.key in value for value in stored_values(token))
    assert issued.key.startswith(token.prefix) and len(token.prefix) == 10


def test_creating_and_revoking_a_token_are_journaled_with_who_did_it():
    issued = token_create(name="repair-bot", role="agent", actor="cli")
    assert token_revoke(name="repair-bot", actor="admin:rita") is True

    assert list(JournalEvent.objects.order_by("id").values_list("type", "actor", "evidence")) == [
        (
            "token_created",
            "cli",
            {"name": "repair-bot", "role": "agent", "prefix": issued.key[:10]},
        ),
        (
            "token_revoked",
            "admin:rita",
            {"name": "repair-bot", "role": "agent", "prefix": issued.key[:10]},
        ),
    ]


def test_revoking_twice_is_a_no_op_and_an_unknown_name_is_an_error():
    token_create(name="repair-bot", role="agent", actor="cli")
    token_revoke(name="repair-bot", actor="cli")
    assert token_revoke(name="repair-bot", actor="cli") is False
    assert JournalEvent.objects.filter(type="token_revoked").count() == 1
    with pytest.raises(TokenNotFound):
        token_revoke(name="nobody", actor="cli")


@pytest.mark.parametrize(
    ("name", "role", "field"),
    [("", "agent", "name"), ("has space", "agent", "name"), ("bot", "admin", "role")],
)
def test_bad_token_requests_name_the_field(name, role, field):
    with pytest.raises(InvalidToken) as refused:
        token_create(name=name, role=role, actor="cli")
    assert refused.value.field == field


def test_token_names_stay_unique_even_after_revocation():
    token_create(name="repair-bot", role="agent", actor="cli")
    token_revoke(name="repair-bot", actor="cli")
    with pytest.raises(InvalidToken, match="already exists"):
        token_create(name="repair-bot", role="reviewer", actor="cli")


def test_a_revoked_or_unknown_key_authenticates_nobody():
    issued = token_create(name="repair-bot", role="agent", actor="cli")
    assert token_for_key(issued.key).name == "repair-bot"
    assert token_for_key(issued.key + "x") is None
    token_revoke(name="repair-bot", actor="cli")
    assert token_for_key(issued.key) is None


def test_a_revocation_by_another_process_is_obeyed_within_the_cache_seconds(settings):
    settings.CAUTERWEB_TOKEN_CACHE_SECONDS = 2
    issued = token_create(name="repair-bot", role="agent", actor="cli")
    start = timezone.now()
    with freeze_time(start):
        assert token_for_key(issued.key).name == "repair-bot"
    # As another process revokes: straight in the table, this process's cache untouched.
    ApiToken.objects.update(revoked_at=start)
    with freeze_time(start + timedelta(seconds=1)):
        assert token_for_key(issued.key).name == "repair-bot"
    with freeze_time(start + timedelta(seconds=2)):
        assert token_for_key(issued.key) is None


def test_with_no_cache_seconds_every_lookup_reads_the_table(settings):
    settings.CAUTERWEB_TOKEN_CACHE_SECONDS = 0
    issued = token_create(name="repair-bot", role="agent", actor="cli")
    assert token_for_key(issued.key).name == "repair-bot"
    ApiToken.objects.update(revoked_at=timezone.now())
    assert token_for_key(issued.key) is None


def test_last_used_at_is_written_at_most_once_a_minute():
    issued = token_create(name="repair-bot", role="agent", actor="cli")
    start = timezone.now()
    with freeze_time(start):
        token_for_key(issued.key)
    with freeze_time(start + timedelta(seconds=30)):
        assert token_for_key(issued.key).last_used_at == start
    with freeze_time(start + timedelta(seconds=61)):
        token_for_key(issued.key)
    assert ApiToken.objects.get().last_used_at == start + timedelta(seconds=61)


def test_create_token_prints_the_key_once_as_json(capsys):
    call_command("create_token", "repair-bot", "--role", "agent", "--json")
    document = json.loads(capsys.readouterr().out)
    assert (document["name"], document["role"]) == ("repair-bot", "agent")
    assert token_for_key(document["token"]).name == "repair-bot"


def test_create_token_refuses_a_taken_name_with_a_clear_message():
    call_command("create_token", "repair-bot", "--role", "agent")
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_token", "repair-bot", "--role", "reviewer")


def test_revoke_token_command(capsys):
    call_command("create_token", "repair-bot", "--role", "agent")
    capsys.readouterr()
    call_command("revoke_token", "repair-bot", "--json")
    assert json.loads(capsys.readouterr().out) == {"name": "repair-bot", "revoked": True}
    assert ApiToken.objects.get().revoked_at is not None
    with pytest.raises(CommandError, match="no token named 'nobody'"):
        call_command("revoke_token", "nobody")


def test_an_admin_creates_a_token_and_sees_the_key_once(client):
    admin = User.objects.create_superuser("root", password="correct-horse-battery")
    client.force_login(admin)

    response = client.post(
        "/admin/lifecycle/apitoken/add/", {"name": "repair-bot", "role": "agent"}, follow=True
    )

    token = ApiToken.objects.get(name="repair-bot")
    shown = [str(m) for m in response.context["messages"] if token.prefix in str(m)]
    assert len(shown) == 1 and "not shown again" in shown[0]
    key = shown[0].split(": ", 1)[1].split(" ")[0]
    assert token_for_key(key) == token
    assert token.created_by == admin
    assert JournalEvent.objects.get().actor == "admin:root"
    # Its page never shows the key again, and nothing about it can be edited.
    page = client.get(f"/admin/lifecycle/apitoken/{token.pk}/change/").content.decode()
    assert key not in page and token.key_hash not in page


def test_an_admin_revokes_tokens_with_the_list_action(client):
    client.force_login(User.objects.create_superuser("root", password="correct-horse-battery"))
    token_create(name="repair-bot", role="agent", actor="cli")
    token = ApiToken.objects.get()

    client.post(
        "/admin/lifecycle/apitoken/",
        {"action": "revoke", "_selected_action": [token.pk]},
    )

    assert ApiToken.objects.get().revoked_at is not None
    assert JournalEvent.objects.filter(type="token_revoked").get().actor == "admin:root"


def test_the_admin_form_refuses_a_bad_name_before_creating_anything(client):
    client.force_login(User.objects.create_superuser("root", password="correct-horse-battery"))
    response = client.post("/admin/lifecycle/apitoken/add/", {"name": "has space", "role": "agent"})
    assert response.status_code == 200 and "it names the actor" in response.content.decode()
    assert not ApiToken.objects.exists()
