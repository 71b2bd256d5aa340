"""Concurrent replays in the embedded default (semantics §18): a bounded pool of threads, the
same verdicts at every concurrency, dispatch in queue order, progress a page can poll."""

import hashlib
import threading

import pytest

from lifecycle.models import JournalEvent, Rule
from replay import selectors
from replay.rounds import round_run
from tests.scenarios import corpus, failing, rule, win


def _noise(*parts) -> float:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32


def deterministic(case, context):
    """A harness whose answer is a function of the case, the rule's text, the arm and the
    repeat only — never of timing or of which replays ran alongside it."""
    context.mark_execution_started()
    read = case.rule["id"] in [r["id"] for r in context.rule_tool(scope=case.rule["scope"])]
    effect = {"fixes": 0.5, "harms": -0.5, "noop": 0.0}[case.rule["directive"].split()[0]]
    base = dict(case.trajectory["metrics"])
    value = base["task_completion"] + (effect if read else 0.0)
    value += 0.1 * _noise(case.id, case.rule["directive"], context.arm, context.repeat) - 0.05
    if case.kind == "win" and effect >= 0:
        value = base["task_completion"]
    base["task_completion"] = min(1.0, max(0.0, round(value, 3)))
    return {"traces": [{"metrics": base}]}


@pytest.fixture
def wired(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_rounds_concurrent:deterministic"
    settings.CAUTERWEB_VERIFIER = ""
    settings.CAUTERWEB_REPLAY_TIMEOUT_S = 30.0
    settings.CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S = 0.0
    settings.CAUTERWEB_VALIDATION_ROUND_BUDGET_S = 0.0
    settings.CAUTERWEB_LOCK_URL = ""
    return settings


def _verdicts_at(settings, concurrency: int, batch: int) -> dict:
    settings.CAUTERWEB_REPLAY_CONCURRENCY = concurrency
    Rule.objects.filter(state__in=["candidate", "active"]).update(state="retired")
    for i, effect in enumerate(["fixes", "harms", "noop", "fixes"]):
        rule(f"B{batch}-{i}", directive=f"{effect} step {i}")
    round_run()
    return {
        r.directive: (r.state, r.pending_reason, r.verdict_reason)
        for r in Rule.objects.filter(pk__startswith=f"B{batch}-")
    }


@pytest.mark.parametrize("design", ["paired", "single"])
@pytest.mark.django_db
def test_verdicts_are_the_same_at_concurrency_1_4_and_8(wired, design):
    wired.CAUTERWEB_REPLAY_DESIGN = design
    # Every look in one round, so each batch of rules is decided before the next is recorded.
    wired.CAUTERWEB_REPLAY_LOOKS_PER_ROUND = 8
    corpus(*[failing(f"F-{i}", minutes=i) for i in range(3)], win("S-1"), win("S-2", 1))
    one = _verdicts_at(wired, 1, batch=1)
    assert one == _verdicts_at(wired, 4, batch=4) == _verdicts_at(wired, 8, batch=8)
    states = {state for state, _, _ in one.values()}
    assert "active" in states and "retired" in states


class Gauge:
    """How many replays are inside the harness at once."""

    def __init__(self):
        self.lock = threading.Lock()
        self.now = self.most = 0

    def __enter__(self):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def __exit__(self, *exc):
        with self.lock:
            self.now -= 1


GAUGE = Gauge()
BARRIER: dict = {}


def gauged(case, context):
    with GAUGE:
        if "barrier" in BARRIER:
            # Returns only once four replays are inside at the same time.
            BARRIER["barrier"].wait(timeout=20)
        return deterministic(case, context)


@pytest.mark.django_db
def test_at_concurrency_1_never_more_than_one_replay_is_in_flight(wired):
    wired.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_rounds_concurrent:gauged"
    wired.CAUTERWEB_REPLAY_CONCURRENCY = 1
    GAUGE.most = 0
    BARRIER.clear()
    corpus(*[failing(f"F-{i}", minutes=i) for i in range(3)], win("S-1"))
    for i in range(3):
        rule(f"R-{i}", directive=f"fixes step {i}")
    vround = round_run()
    assert vround.summary["replays"] > 3 and GAUGE.most == 1


@pytest.mark.django_db
def test_at_concurrency_4_four_replays_run_at_once_across_candidates(wired):
    wired.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_rounds_concurrent:gauged"
    wired.CAUTERWEB_REPLAY_CONCURRENCY = 4
    wired.CAUTERWEB_REPLAY_DESIGN = "single"
    GAUGE.most = 0
    BARRIER["barrier"] = threading.Barrier(4)
    corpus(failing("F-1"))  # one case per candidate: four at once means four candidates
    for i in range(8):
        rule(f"R-{i}", directive=f"fixes step {i}")
    try:
        vround = round_run()
    finally:
        BARRIER.clear()
    assert vround.status == "finished" and vround.summary["promoted"] == 8
    assert GAUGE.most == 4


def test_the_progress_of_a_running_round_is_readable(
    registry_seeded,  # noqa: F811
    settings,
    monkeypatch,
):  # semantics §18: what a live page polls
    from replay import rounds

    settings.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_rounds_concurrent:watching"
    settings.CAUTERWEB_REPLAY_DESIGN = "single"
    settings.CAUTERWEB_REPLAY_CONCURRENCY = 1
    settings.CAUTERWEB_LOCK_URL = ""
    real_write = rounds.verdicts_write

    def write(**kwargs):
        real_write(**kwargs)
        WRITTEN.set()

    monkeypatch.setattr(rounds, "verdicts_write", write)
    corpus(failing("F-1"), win("S-1"))
    rule("R-1", directive="fixes step 1")
    rule("R-2", directive="fixes step 2")
    SEEN.clear()
    WRITTEN.clear()
    vround = round_run()
    # During R-2's replays, once R-1's verdict is written: one written, one to go.
    seen = SEEN["R-2"]
    assert (seen["round"], seen["running"], seen["candidates"], seen["written"]) == (
        vround.pk,
        True,
        2,
        1,
    )
    assert seen["waiting"] + len(seen["in_flight"]) == 1
    done = selectors.round_progress(vround)
    assert (done["running"], done["written"], done["waiting"], done["in_flight"]) == (
        False,
        2,
        0,
        {},
    )


SEEN: dict = {}
WRITTEN = threading.Event()


def watching(case, context):
    from replay.models import ValidationRound

    if case.rule["id"] == "R-2" and "R-2" not in SEEN:
        WRITTEN.wait(timeout=10)
        running = JournalEvent.objects.filter(type="validation_round_started").latest("id")
        SEEN["R-2"] = selectors.round_progress(ValidationRound.objects.get(pk=running.round_id))
    return deterministic(case, context)


EXTENDED = threading.Event()


def outlasts_a_lock_period(case, context):
    # Returns once the round has extended its lock while this replay ran (or after 10 s).
    EXTENDED.clear()
    SEEN["extended during the replay"] = EXTENDED.wait(timeout=10)
    return deterministic(case, context)


@pytest.mark.django_db
def test_the_round_extends_its_lock_while_a_replay_runs_with_no_time_limit(wired, monkeypatch):
    from replay import lock

    wired.CAUTERWEB_REPLAY_BACKEND = "tests.services.test_rounds_concurrent:outlasts_a_lock_period"
    wired.CAUTERWEB_REPLAY_DESIGN = "single"
    wired.CAUTERWEB_REPLAY_TIMEOUT_S = 0.0  # no limit: only the lock's extension keeps it
    monkeypatch.setattr(lock, "lock_ttl_s", lambda: 0.4)
    real_extend = lock.extend

    def extend(holder, **kwargs):
        held = real_extend(holder, **kwargs)
        EXTENDED.set()
        return held

    monkeypatch.setattr(lock, "extend", extend)
    SEEN.clear()
    corpus(failing("F-1"))
    rule("R-1", directive="fixes step 1")
    vround = round_run()
    assert SEEN == {"extended during the replay": True}
    assert vround.status == "finished" and vround.summary["promoted"] == 1
