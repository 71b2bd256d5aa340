"""Configuration from the environment (semantics §16): defaults, and a value that does not parse
stops start-up with a message naming the variable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


KNOBS = (
    "import django; django.setup(); from django.conf import settings; "
    "print(settings.CAUTERWEB_RULE_PROMOTE_MARGIN, settings.CAUTERWEB_MAX_FAILING_CASES)"
)


def start(code: str = KNOBS, **env) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CAUTERWEB_")}
    environment.update(env)
    environment["DJANGO_SETTINGS_MODULE"] = "cauterweb.settings"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_spec_defaults_are_in_force():
    assert (settings.CAUTERWEB_RULE_PROMOTE_MARGIN, settings.CAUTERWEB_RULE_REGRESS_MARGIN) == (
        0.05,
        0.05,
    )
    assert settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS == 5
    assert settings.CAUTERWEB_BASELINE_WINDOW == 200
    assert (settings.CAUTERWEB_MAX_FAILING_CASES, settings.CAUTERWEB_MAX_PROTECTED_WINS) == (3, 2)
    assert settings.CAUTERWEB_MAX_REPLAY_ATTEMPTS == 3
    assert settings.CAUTERWEB_REPLAY_TIMEOUT_S == 300
    assert settings.CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S == 0
    assert settings.CAUTERWEB_VALIDATION_ROUND_BUDGET_S == 0
    assert settings.CAUTERWEB_REPLAY_LOOKS_PER_ROUND == 1


def test_the_trial_knobs_of_spec_20_have_their_defaults(settings):
    # conftest pins the §8 tests to `baseline`; the shipped default is `randomized`.
    result = start(
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.CAUTERWEB_TRIAL_DESIGN, s.CAUTERWEB_TRIAL_ALLOCATION, s.CAUTERWEB_TRIAL_ALPHA, "
        "s.CAUTERWEB_TRIAL_MAX_SESSIONS)"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["randomized", "0.5", "0.05", "400"]


def test_a_knob_is_read_from_its_environment_variable():
    result = start(CAUTERWEB_RULE_PROMOTE_MARGIN="0.1", CAUTERWEB_MAX_FAILING_CASES="5")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0.1", "5"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CAUTERWEB_RULE_PROMOTE_MARGIN", "lots"),
        ("CAUTERWEB_MAX_FAILING_CASES", "3.5"),
        ("CAUTERWEB_REPLAY_TIMEOUT_S", "-1"),
        ("CAUTERWEB_REPLAY_BACKEND", "not a path"),
        ("CAUTERWEB_REPLAY_LOOKS_PER_ROUND", "0"),
        ("CAUTERWEB_REPLAY_LOOKS_PER_ROUND", "two"),
        ("CAUTERWEB_TRIAL_DESIGN", "bandit"),
        ("CAUTERWEB_TRIAL_ALLOCATION", "1"),
        ("CAUTERWEB_TRIAL_ALLOCATION", "half"),
        ("CAUTERWEB_TRIAL_ALPHA", "0"),
        ("CAUTERWEB_TRIAL_ALPHA", "0.5"),
        ("CAUTERWEB_TRIAL_MAX_SESSIONS", "1"),
        ("CAUTERWEB_TRIAL_MAX_SESSIONS", "many"),
        ("DEBUG", "maybe"),
        ("DATABASE_URL", "nosuchdb://x"),
    ],
)
def test_a_value_that_does_not_parse_stops_start_up_naming_the_variable(name, value):
    result = start(**{name: value})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert name in result.stderr


def test_the_looks_per_round_are_read_from_the_environment():
    result = start(
        "import django; django.setup(); from replay.config import RoundConfig; "
        "print(RoundConfig.from_settings().looks_per_round)",
        CAUTERWEB_REPLAY_LOOKS_PER_ROUND="3",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3"]
