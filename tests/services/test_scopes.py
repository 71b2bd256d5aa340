"""Scope files and the rule tool (semantics §4, §5)."""

import json

import pytest
from django.core.management import call_command

from lifecycle.models import RuleRead
from lifecycle.scopes import PROVISIONAL_HEADING, render_scope, rule_tool_read, scope_rules
from lifecycle.services.rules import rule_promote

from ..builders import candidate

pytestmark = pytest.mark.django_db


@pytest.fixture
def rules(engine):
    push = candidate("R-PUSH")
    rule_promote(rule_id=push.id, actor=engine, evidence={})
    lfs = candidate(
        "R-LFS",
        trigger="when git lfs smudge fails",
        directive="run git lfs install first",
        signature=["tool:git-lfs", "error:smudge_failed"],
    )
    rule_promote(rule_id=lfs.id, actor=engine, evidence={})
    candidate(
        "C-REBASE",
        trigger="when a rebase stops on conflicts",
        directive="abort and merge",
        signature=["action:git.rebase"],
    )
    candidate(
        "C-NPM",
        scope="npm",
        trigger="when npm ci fails with ERESOLVE",
        directive="use --legacy-peer-deps",
        signature=["error:eresolve"],
    )


def test_a_scope_file_lists_active_rules_then_the_provisional_heading(rules):
    text = render_scope("git")
    head, provisional = text.split(f"## {PROVISIONAL_HEADING}")
    assert "[R-PUSH]" in head and "[R-LFS]" in head
    assert "[C-REBASE]" in provisional and "[R-PUSH]" not in provisional
    assert "C-NPM" not in text  # another scope


def test_a_query_narrows_active_rules_but_never_candidates(rules):
    # semantics §4: retrieval may narrow the active rules; it never filters out candidates.
    active, candidates = scope_rules("git", query="action:git.push error:non_fast_forward")
    assert [r.id for r in active] == ["R-PUSH"]
    assert [r.id for r in candidates] == ["C-REBASE"]


def test_a_query_by_atoms_does_not_match_on_shared_words(rules):
    # semantics §11: a push rule is not retrieved for a git status state just because both say "git".
    active, _ = scope_rules("git", query="tool:git action:git.status")
    assert active == []


def test_the_rule_tool_records_each_read_against_the_session(rules):
    # semantics §5: each read is recorded against the session that made it.
    returned = rule_tool_read(scope="git", session_id="sess-9", query=None)
    assert [r["id"] for r in returned] == ["R-PUSH", "R-LFS", "C-REBASE"]
    assert returned[2]["state"] == "candidate"
    assert set(RuleRead.objects.filter(session_id="sess-9").values_list("rule_id", flat=True)) == {
        "R-PUSH",
        "R-LFS",
        "C-REBASE",
    }


def test_a_replay_context_sees_only_its_own_candidate(rules):
    # semantics §7.3: every other candidate is hidden; actives stay visible as the baseline.
    candidate(
        "C-OTHER",
        trigger="when a push hook fails",
        directive="run hooks locally",
        signature=["error:hook"],
    )
    active, candidates = scope_rules("git", visible_candidates=["C-OTHER"])
    assert [r.id for r in candidates] == ["C-OTHER"]
    assert {r.id for r in active} == {"R-PUSH", "R-LFS"}


def test_render_scope_command_prints_json(rules, capsys):
    call_command("render_scope", "git", "--json")
    document = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in document["candidates"]] == ["C-REBASE"]
    assert PROVISIONAL_HEADING in document["text"]
