"""Browser tests: Debian's headless Chromium driven by Playwright for Python against
Django's live server, on the demo data.

- Never `playwright install`: the browser is the system's /usr/bin/chromium. Missing, the tests
  skip with the reason locally and fail under CI=true, so CI can never go green by skipping.
- The demo is loaded ONCE per session (CI has 15 minutes): `demo_setup` runs against the test
  database, every row is kept, and every test starts from that snapshot (the tables are emptied
  and the rows bulk-inserted again, which takes a fraction of a second).
- Each test saves a screenshot of every page it visits under its pytest-playwright output
  folder (`--output`, default `test-results/`).
"""

import io
import os
import re
from pathlib import Path

import pytest
from celery import current_app
from django.apps import apps
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import transaction
from django.db.models import Model
from django.test import Client, override_settings

# Playwright's sync API runs an event loop in the test thread; Django would otherwise refuse
# the ORM calls the fixtures make from that thread.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = Path(os.environ.get("CAUTERWEB_CHROMIUM", "/usr/bin/chromium"))
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
DEMO_USER, DEMO_PASSWORD = "demo", "demo"
# As `make demo` runs it: the shipped simulated harness replays the demo's cases.
DEMO_BACKEND = "replay.backends.simulated:replay"
# And with the shipped forward-trial design (semantics §20), not the suite's §8 default.
DEMO_TRIALS = "randomized"
# The demo login is hashed with the real hasher's cost otherwise: seconds per login on CI.
FAST_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session", autouse=True)
def _chromium_present() -> None:
    if CHROMIUM.exists():
        return
    reason = f"needs Debian chromium at {CHROMIUM} (apt-get install chromium)"
    if IN_CI:
        pytest.fail(f"CI=true but this test {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    return {
        **browser_type_launch_args,
        "executable_path": str(CHROMIUM),
        "args": [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    }


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict) -> dict:
    return {**browser_context_args, "viewport": {"width": 1280, "height": 900}}


@pytest.fixture(scope="session")
def base_url(live_server) -> str:
    return live_server.url


Snapshot = list[tuple[type[Model], list[str], list[tuple]]]


def _take_snapshot() -> Snapshot:
    """Every row of every table, as (model, column attnames, rows)."""
    snapshot = []
    for model in apps.get_models(include_auto_created=True):
        if model._meta.proxy or not model._meta.managed:
            continue
        names = [f.attname for f in model._meta.concrete_fields]
        rows = list(model._base_manager.order_by().values_list(*names))
        if rows:
            snapshot.append((model, names, rows))
    return snapshot


def _restore(snapshot: Snapshot) -> None:
    # Bulk inserts in one transaction: foreign keys are checked at commit, so table order does
    # not matter, and model save() overrides (the journal's append-only guard) are not involved.
    with transaction.atomic():
        for model, names, rows in snapshot:
            model._base_manager.bulk_create(
                [model(**dict(zip(names, row, strict=True))) for row in rows], batch_size=500
            )


@pytest.fixture(scope="session")
def demo_snapshot(_chromium_present, django_db_setup, django_db_blocker) -> Snapshot:
    """The demo, loaded and validated to standstill once (replayed by the simulated harness, as
    `make demo` does), kept as rows to put back before each test."""
    with (
        django_db_blocker.unblock(),
        override_settings(
            CAUTERWEB_REPLAY_BACKEND=DEMO_BACKEND,
            CAUTERWEB_TRIAL_DESIGN=DEMO_TRIALS,
            PASSWORD_HASHERS=FAST_HASHERS,
        ),
    ):
        # As in the embedded default, the follow-ups (stored extraction scores, the duplicate
        # check) run at once: with a real broker they would wait for a worker this test lacks.
        eager = current_app.conf.task_always_eager
        current_app.conf.task_always_eager = True
        try:
            call_command("demo_setup", "--no-input", stdout=io.StringIO())
        finally:
            current_app.conf.task_always_eager = eager
        return _take_snapshot()


@pytest.fixture(autouse=True)
def _demo_data(demo_snapshot, transactional_db, settings) -> None:
    """Every browser test starts from the whole demo, whatever the test before it changed.

    Not Django's serialized rollback: its JSON round trip takes seconds per test on this data,
    and Playwright's sync API gives tests another contextvars context than session fixtures, so
    the contents Django keeps on a connection object would be lost anyway."""
    # Sequences keep running (as between TransactionTestCases) so the snapshot's ids never
    # collide with rows a test inserts; post_migrate stays off so the snapshot's content types
    # and permissions load into empty tables.
    call_command(
        "flush", verbosity=0, interactive=False, reset_sequences=False, inhibit_post_migrate=True
    )
    _restore(demo_snapshot)
    settings.CAUTERWEB_REPLAY_BACKEND = DEMO_BACKEND
    settings.CAUTERWEB_TRIAL_DESIGN = DEMO_TRIALS
    settings.PASSWORD_HASHERS = FAST_HASHERS


class Shots:
    """Saves numbered full-page screenshots in the test's output folder."""

    def __init__(self, page, folder: str):
        self.page = page
        self.folder = Path(folder)
        self.taken: list[Path] = []

    def __call__(self, name: str) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        path = self.folder / f"{len(self.taken) + 1:02d}-{slug}.png"
        self.page.screenshot(path=str(path), full_page=True)
        self.taken.append(path)
        return path


@pytest.fixture
def shot(page, output_path) -> Shots:
    return Shots(page, output_path)


def log_in(page, *, username: str = DEMO_USER, password: str = DEMO_PASSWORD) -> None:
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name=re.compile("sign in|log in", re.IGNORECASE)).click()
    page.wait_for_load_state()


@pytest.fixture
def signed_in(page, live_server):
    """A page signed in as the demo reviewer through a session cookie (the login form itself is
    tested in test_browser_login.py)."""
    client = Client()
    client.force_login(User.objects.get(username=DEMO_USER))
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
    return page
