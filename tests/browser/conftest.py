"""Browser tests (issue 5): Debian's headless Chromium driven by Playwright for Python against
Django's live server, on the demo data.

- Never `playwright install`: the browser is the system's /usr/bin/chromium. Missing, the tests
  skip with the reason locally and fail under CI=true, so CI can never go green by skipping.
- The demo is loaded ONCE per session (CI has 15 minutes): `demo_setup` runs against the test
  database, its contents are serialized, and every test starts from that snapshot (the tables
  are emptied and the snapshot reloaded, which takes a fraction of a second).
- Each test saves a screenshot of every page it visits under its pytest-playwright output
  folder (`--output`, default `test-results/`).
"""

import io
import os
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connections

# Playwright's sync API runs an event loop in the test thread; Django would otherwise refuse
# the ORM calls the fixtures make from that thread.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = Path(os.environ.get("CAUTERWEB_CHROMIUM", "/usr/bin/chromium"))
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
DEMO_USER, DEMO_PASSWORD = "demo", "demo"


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


@pytest.fixture(scope="session")
def demo_snapshot(_chromium_present, django_db_setup, django_db_blocker) -> str:
    """The demo, loaded and validated to standstill once, serialized like Django's serialized
    rollback contents."""
    with django_db_blocker.unblock():
        call_command("demo_setup", "--no-input", stdout=io.StringIO())
        return connections["default"].creation.serialize_db_to_string()


@pytest.fixture(autouse=True)
def _demo_data(demo_snapshot, transactional_db) -> None:
    """Every browser test starts from the whole demo, whatever the test before it changed.

    Done by hand rather than with `django_db_serialized_rollback`: Playwright's sync API gives
    the tests another contextvars context than the session fixtures, hence other connection
    objects, and the serialized contents Django keeps on a connection object are lost."""
    # Sequences keep running (as between TransactionTestCases) so the snapshot's ids never
    # collide with rows a test inserts; post_migrate stays off so the snapshot's content types
    # and permissions load into empty tables.
    call_command(
        "flush", verbosity=0, interactive=False, reset_sequences=False, inhibit_post_migrate=True
    )
    connections["default"].creation.deserialize_db_from_string(demo_snapshot)


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
def signed_in(page):
    """A page logged in as the demo reviewer."""
    log_in(page)
    return page
