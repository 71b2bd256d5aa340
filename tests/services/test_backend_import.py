"""A replay backend that cannot be imported (docs/deploy.md#faults-timeouts-leases-and-sizing-the-workers):
a wrong `CAUTERWEB_REPLAY_BACKEND` path, or an ImportError inside the harness's own module, ends
each replay at once as `inconclusive` with the import's error as its reason — in the round's
process and in a replay worker alike — instead of failing the round or leaving its replays to
run out their leases."""

import time

import pytest

from replay import dispatch
from replay.cases import TREATMENT
from replay.dispatch import Job
from replay.models import ReplaySession
from replay.rounds import round_run
from tests.scenarios import case_events, corpus, failing, rule, state_of

pytestmark = pytest.mark.usefixtures("scripted_engine")

MISSING = "tests.no_such_harness_module:run"


@pytest.fixture
def harness_that_fails_to_import(tmp_path, monkeypatch) -> str:
    """A harness module whose own import fails (a dependency the worker lacks)."""
    (tmp_path / "harness_missing_dependency.py").write_text(
        "import a_dependency_this_worker_lacks\n\n\ndef run(case, context):\n    return {}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "harness_missing_dependency:run"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("which", "error"),
    [
        ("missing", "ModuleNotFoundError: No module named 'tests.no_such_harness_module'"),
        ("inside", "ModuleNotFoundError: No module named 'a_dependency_this_worker_lacks'"),
    ],
)
def test_a_round_with_an_unimportable_backend_finishes_with_each_replay_inconclusive(
    settings, harness_that_fails_to_import, which, error
):
    path = MISSING if which == "missing" else harness_that_fails_to_import
    settings.CAUTERWEB_REPLAY_BACKEND = path
    corpus(failing("F-1"))
    rule("R-1")
    began = time.monotonic()
    vround = round_run()
    assert vround.status == "finished"
    # At once: no replay waited for a timeout (5 s in this fixture).
    assert time.monotonic() - began < 4.0
    r = state_of("R-1")
    assert (r.state, r.pending_reason) == ("candidate", "replay_inconclusive")
    f1 = case_events("R-1")["F-1"]
    assert f1["outcome"] == "inconclusive"
    assert f1["error"] == (
        f"BackendUnavailable: the replay backend {path} could not be imported: {error}"
    )


@pytest.mark.django_db
def test_a_replay_worker_that_cannot_import_the_backend_stores_the_reason_at_once(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = MISSING
    dispatch.forget_rounds()
    corpus(failing("F-1"))
    rule("R-1")
    sid = "replay:1:R-1:F-1"
    dispatch.open_session(Job("R-1", "F-1", "failing", TREATMENT, 0, sid), 1, status="queued")
    try:
        assert dispatch.run_stored(sid) is True
    finally:
        redis = dispatch._results_redis()
        if redis is not None:
            redis.delete(dispatch.results_key(1))
    row = ReplaySession.objects.get()
    assert row.status == "done" and row.lease_expires_at is None
    assert row.result["metrics"] is None
    assert "could not be imported: ModuleNotFoundError" in row.result["error"]
