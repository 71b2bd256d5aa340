"""The rule page's paired evidence (semantics §17.5): the case × arm matrix of samples with its
flips, sorted by regression; its CSV and JSON export; the effect against the promote margin;
the control arm's noise floor; and why the rule is pending, in words. The data comes from real
paired rounds run by the engine against the simulated flaky agent."""

import csv
import io
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from freezegun import freeze_time

from dashboard import presenters
from lifecycle.models import Rule
from replay.backends.simulated import StochasticAgent
from replay.models import ReplaySample
from replay.rounds import round_run
from tests.builders import T0
from tests.services.test_engine_scenarios import corpus, failing, rule, win

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
CLOCK: list = []


class Ticking(StochasticAgent):
    """The flaky agent, each replay taking one (frozen) second: a round budget runs out after
    a known number of replays, with nothing slept through."""

    def __call__(self, case, context):
        CLOCK[0].tick(1.0)
        return super().__call__(case, context)


# A rule that lifts a 0.5 success rate by 0.2: not decided after the first batch of 4 repeats.
modest = Ticking(effect=0.2, seed=3)


@pytest.fixture
def paired(settings):
    settings.CAUTERWEB_REPLAY_BACKEND = "tests.web.test_paired_evidence:modest"
    settings.CAUTERWEB_REPLAY_DESIGN = "paired"
    settings.CAUTERWEB_REPLAY_CONCURRENCY = 1
    settings.CAUTERWEB_VERIFIER = ""
    settings.CAUTERWEB_LOCK_URL = ""
    # One batch (5 cases × 2 arms × 4 repeats = 40 one-second replays), then the budget is out.
    settings.CAUTERWEB_VALIDATION_ROUND_BUDGET_S = 30.0
    return settings


@pytest.fixture
def pending_rule(paired):
    """R-1 after one paired round: three failing cases and two protected wins, 4 of 8 repeats
    per case and arm, pending."""
    corpus(
        failing("F-1"),
        failing("F-2", minutes=1),
        failing("F-3", minutes=2),
        win("S-1"),
        win("S-2", minutes=1),
    )
    rule()
    with freeze_time(T0, tick=False) as frozen:
        CLOCK[:] = [frozen]
        round_run()
    CLOCK.clear()
    return Rule.objects.get(pk="R-1")


def test_the_engine_left_the_rule_pending_for_more_samples(pending_rule):
    assert (pending_rule.state, pending_rule.pending_reason) == ("candidate", "replay_inconclusive")
    assert ReplaySample.objects.filter(rule=pending_rule).count() == 40
    assert pending_rule.verdict_reason.endswith("needs more samples: 4 of 8 repeats per case")

