"""Shared fixtures: personas (reviewer, viewer, outsider) and service markers.

Tests marked `postgres` need PostgreSQL and tests marked `redis` need a Redis broker. Locally
they are skipped with the reason when the service is not configured; under CI=true a missing
service fails the run instead, so CI can never go green by skipping.
"""

import os

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import connection

from lifecycle.states import Actor

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def pytest_configure(config):
    # Password hashing is deliberately slow; tests that create users need none of that.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # The test client and the live server speak plain HTTP; production's HTTPS defaults are
    # tested on their own (tests/unit/test_deploy_settings.py).
    settings.SECURE_SSL_REDIRECT = settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
    settings.SECURE_HSTS_SECONDS = 0
    # The suite was written for semantics §8, which the `baseline` trial design keeps exactly;
    # tests of the shipped `randomized` design (§20) ask for it (`randomized_trials`). Set in
    # the environment too, for the worker and server processes some tests start.
    settings.CAUTERWEB_TRIAL_DESIGN = "baseline"
    os.environ["CAUTERWEB_TRIAL_DESIGN"] = "baseline"
    _flush_past_the_journal_guard()


def _flush_past_the_journal_guard() -> None:
    """Transactional tests empty the database with TRUNCATE between tests, which the journal's
    trigger refuses (migration 0009), as it should in production. The tests connect as the
    owner, who may set the trigger aside for the length of the flush's own transaction."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    flush = DatabaseOperations.sql_flush
    guard = "ALTER TABLE lifecycle_journalevent {} TRIGGER journal_no_truncate"

    def sql_flush(self, style, tables, **kwargs):
        statements = flush(self, style, tables, **kwargs)
        if "lifecycle_journalevent" not in tables:
            return statements
        return [guard.format("DISABLE"), *statements, guard.format("ENABLE")]

    DatabaseOperations.sql_flush = sql_flush


def _missing_service(item) -> str:
    if item.get_closest_marker("postgres") and connection.vendor != "postgresql":
        return "needs PostgreSQL: set DATABASE_URL=postgres://…"
    if item.get_closest_marker("redis") and not settings.CELERY_BROKER_URL.startswith("redis"):
        return "needs Redis and Celery workers: set CELERY_BROKER_URL=redis://…"
    return ""


def pytest_runtest_setup(item):
    reason = _missing_service(item)
    if not reason:
        return
    if IN_CI:
        pytest.fail(f"CI=true but this test {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _metric_registry_read_afresh():
    """Report intake keeps the metric registry it read (`lifecycle.metrics.current_registry`);
    a test that changes the registry must not meet the one an earlier test read."""
    from lifecycle.metrics import forget_registry

    forget_registry()


@pytest.fixture(autouse=True)
def _tasks_run_in_process(request):
    """Kicked rounds run inline, as on the embedded default, even when CI configures a broker:
    only tests marked `redis` talk to real workers, and a test must not leave tasks queued for
    them to pick up later against another test's data."""
    if request.node.get_closest_marker("redis"):
        yield
        return
    from cauterweb.celery import app

    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        yield
    finally:
        app.conf.task_always_eager = previous


@pytest.fixture
def randomized_trials(settings):
    """Forward trials as randomized experiments on the sessions that read a scope (§20)."""
    settings.CAUTERWEB_TRIAL_DESIGN = "randomized"
    return settings


@pytest.fixture
def engine() -> Actor:
    return Actor.engine()


@pytest.fixture
def reviewer_actor() -> Actor:
    return Actor.reviewer("rita")


@pytest.fixture
def agent_actor() -> Actor:
    return Actor.agent("repair-bot")


@pytest.fixture
def reviewer_user(db) -> User:
    user = User.objects.create_user("rita", password="correct-horse-battery")
    user.groups.add(Group.objects.get_or_create(name="reviewers")[0])
    return user


@pytest.fixture
def viewer_user(db) -> User:
    user = User.objects.create_user("vic", password="correct-horse-battery")
    user.groups.add(Group.objects.get_or_create(name="viewers")[0])
    return user


@pytest.fixture
def reviewer_client(client, reviewer_user):
    client.force_login(reviewer_user)
    return client


@pytest.fixture
def viewer_client(client, viewer_user):
    client.force_login(viewer_user)
    return client


@pytest.fixture
def scripted_engine(settings):
    """The scripted replay backend of tests/scenarios.py, wired as semantics §7 writes it: one
    replay per case against the recorded original, one at a time, no budget, no verifier, the
    database lock; each test scripts its cases."""
    from tests.scenarios import BACKEND, CALLS, SCRIPT

    settings.CAUTERWEB_REPLAY_BACKEND = BACKEND
    settings.CAUTERWEB_VERIFIER = ""
    settings.CAUTERWEB_REPLAY_TIMEOUT_S = 5.0
    settings.CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S = 0.0
    settings.CAUTERWEB_VALIDATION_ROUND_BUDGET_S = 0.0
    settings.CAUTERWEB_LOCK_URL = ""
    settings.CAUTERWEB_REPLAY_DESIGN = "single"
    settings.CAUTERWEB_REPLAY_CONCURRENCY = 1
    SCRIPT.clear()
    CALLS.clear()
    yield
    SCRIPT.clear()


@pytest.fixture
def registry_seeded(transactional_db, settings, monkeypatch):
    """For tests whose backend touches the database from its thread: data must be committed.
    The flush of a transactional test empties the registry the migrations seeded: seed it
    again. Commits fire the kicks; the test drives its rounds itself."""
    from lifecycle.models import MetricDefinition
    from replay import tasks

    monkeypatch.setattr(tasks.round_run_task, "delay", lambda **kw: None)

    for name, tier, higher_is_better, aliases in settings.CAUTERWEB_DEFAULT_METRICS:
        MetricDefinition.objects.get_or_create(
            name=name,
            defaults={"tier": tier, "higher_is_better": higher_is_better, "aliases": aliases},
        )
