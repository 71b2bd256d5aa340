"""Configuration from the environment (semantics §16): defaults, and a value that does not parse
stops start-up with a message naming the variable."""

import ast
import os
import re
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
        ("CAUTERWEB_REPLAY_FUTILITY_BETA", "1"),
        ("CAUTERWEB_REPLAY_FUTILITY_BETA", "-0.02"),
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


README = ROOT / "README.md"
SEMANTICS = ROOT / "docs" / "semantics.md"
READERS = {"env_str", "env_bool", "env_float", "env_int", "env_choice", "env_callable_or_url"}


def variables_read() -> dict[str, ast.expr | None]:
    """Every environment variable settings.py reads, with the default expression it passes."""
    found = {}
    for node in ast.walk(ast.parse((ROOT / "cauterweb" / "settings.py").read_text())):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        reader = func.id if isinstance(func, ast.Name) else ast.unparse(func)
        if reader in READERS or reader == "os.environ.get":
            name = node.args[0]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                found[name.value] = node.args[1] if len(node.args) > 1 else None
    return found


def configuration_table() -> dict[str, str]:
    """README's configuration table: each variable named in a row's first cell, with its default."""
    section = README.read_text().split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`"):
            for name in re.findall(r"`([A-Z_]+)`", cells[0]):
                rows[name] = cells[1]
    return rows


def test_the_readme_table_names_every_variable_settings_reads_and_no_other():
    read, documented = set(variables_read()), set(configuration_table())
    assert len(read) > 40  # the finder finds them: an empty set would pass below
    assert (read - documented, documented - read) == (set(), set())


def literal_default(expr: ast.expr | None):
    """The default's value when it is a literal (`0.05`, `50 * 1024 * 1024`), else None."""
    if expr is None:
        return None
    try:
        return eval(compile(ast.Expression(expr), "settings.py", "eval"), {"__builtins__": {}})
    except NameError:  # computed from other settings: the table says it in words
        return None


def knob_table() -> dict[str, str]:
    """The semantics' table of knobs (docs/semantics.md#s16), by environment variable, with each
    default's first word (`8 (replays per case and arm …)` states 8)."""
    section = SEMANTICS.read_text().split('<a id="s16">', 1)[1].split("<a id=", 1)[0]
    rows = {}
    for knob, default in re.findall(r"^\| `([a-z_0-9]+)` \| ([^|]+) \|", section, flags=re.M):
        rows[f"CAUTERWEB_{knob.upper()}"] = default.split(" (")[0].strip()
    return rows


def wrong_defaults(table: dict[str, str]) -> tuple[int, list[str]]:
    """How many of the table's defaults are literals settings.py passes, and those that differ."""
    read, checked, wrong = variables_read(), 0, []
    for name, cell in table.items():
        default = literal_default(read.get(name))
        stated = cell.strip("`")
        if default is None or default == "" or not re.fullmatch(r"[\w.]+", stated):
            continue
        checked += 1
        if isinstance(default, bool):
            matches = stated == str(default).lower()
        elif isinstance(default, int | float):
            matches = float(stated) == default
        else:
            matches = stated == default
        if not matches:
            wrong.append(f"{name}: the docs say {cell}, settings.py {default!r}")
    return checked, wrong


def test_every_literal_default_in_the_table_is_the_one_settings_passes():
    checked, wrong = wrong_defaults(configuration_table())
    assert checked > 25
    assert wrong == []


def test_every_knob_of_the_semantics_is_read_with_the_default_it_states():
    table = knob_table()
    assert len(table) > 20
    assert sorted(set(table) - set(variables_read())) == []
    checked, wrong = wrong_defaults(table)
    assert checked > 15
    assert wrong == []
