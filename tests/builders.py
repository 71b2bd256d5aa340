"""The one builder module of the tests: corpus lines, candidates and reports as the services
take them, and rules, journal events and rounds for the pages, so a test reads like the
situation it sets up. Candidates go through `rule_record_candidate` and promotions through
`rule_promote`, the paths production takes; replay-case evidence is scored by the engine."""

import json
import os
import subprocess
import sys
import threading
import time
import types
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from lifecycle import journal
from lifecycle.duplicate_keys import index_rules
from lifecycle.journal import EventType
from lifecycle.models import Rule, Trajectory
from lifecycle.services.rules import rule_record_candidate
from lifecycle.states import Actor
from replay import engine
from replay.config import RoundConfig
from replay.models import ValidationRound

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def trajectory(tid: str, kind: str = "failure", **overrides) -> dict:
    line = {
        "id": tid,
        "kind": kind,
        "task": f"task of {tid}",
        "steps": [{"tool": "git", "input": "git push", "output": "", "error": None}],
        "outcome": {"status": "failed" if kind == "failure" else "ok"},
        "metrics": {"task_completion": 0.2 if kind == "failure" else 0.9, "coherence": 0.8},
        "signature": ["tool:git", "action:git.push"],
        "started_at": (
            T0 + timedelta(minutes=int("".join(c for c in tid if c.isdigit()) or 0))
        ).isoformat(),
    }
    line.update(overrides)
    return line


def jsonl(*objects) -> list[str]:
    return [json.dumps(o) + "\n" for o in objects]


def candidate(
    rule_id: str | None = None,
    *,
    actor: Actor | None = None,
    trigger: str = "when git push fails with non-fast-forward",
    directive: str = "pull latest changes before pushing",
    **fields,
):
    fields.setdefault("scope", "git")
    fields.setdefault("metric", "task_completion")
    fields.setdefault("signature", ["action:git.push", "error:non_fast_forward"])
    rule, _ = rule_record_candidate(
        actor=actor or Actor.agent("repair-bot"),
        trigger=trigger,
        directive=directive,
        rule_id=rule_id,
        **fields,
    )
    return rule


def report(session_id: str, at: datetime, notices=(), metrics=None, rules_read=()) -> dict:
    return {
        "session_id": session_id,
        "at": at.isoformat(),
        "notices": list(notices),
        "metrics": metrics or {"task_completion": 0.8},
        "rules_read": list(rules_read),
    }


def make_rule(rule_id: str, **fields) -> Rule:
    fields.setdefault("trigger", f"when {rule_id} fails with non-fast-forward")
    fields.setdefault("directive", "pull latest changes before pushing")
    fields.setdefault("scope", "git")
    fields.setdefault("metric", "task_completion")
    fields.setdefault("signature", ["action:git.push", "error:non_fast_forward"])
    fields.setdefault("author", "repair-bot")
    fields.setdefault("author_kind", "agent")
    fields.setdefault("recorded_at", T0)
    rule = Rule.objects.create(id=rule_id, content_hash=rule_id, **fields)
    # Filed for the duplicate check as recording files it (lifecycle/duplicate_keys.py).
    index_rules([rule])
    return rule


def make_rules(n: int, *, prefix: str = "R", **fields) -> list[Rule]:
    return [
        make_rule(f"{prefix}-{i:04d}", recorded_at=T0 + timedelta(minutes=i), **fields)
        for i in range(n)
    ]


def make_trajectory(tid: str, kind: str = "failure", **fields) -> Trajectory:
    fields.setdefault("task", f"task of {tid}")
    fields.setdefault("signature", ["action:git.push", "error:non_fast_forward"])
    return Trajectory.objects.create(
        id=tid, kind=kind, content_hash=tid, imported_at=T0, started_at=T0, **fields
    )


_ENGINE = object()


def case_evidence(
    case: str,
    *,
    kind: str = "failing",
    outcome: str = "scored",
    metrics: dict | None = None,
    retire_on: tuple = ("outcome_correct", "task_completion"),
    candidate_read: bool = True,
    deciding_metric=_ENGINE,
    attribution=_ENGINE,
    regressed=_ENGINE,
    improved=_ENGINE,
) -> dict:
    """The evidence the engine journals for one replayed case (semantics §7.4–§7.7), from the
    metrics as (original, replayed): `replay.engine.score_case` decides the deciding metric,
    the attribution, regressed and improved, unless a test pins one to stage a situation."""
    metrics = metrics or {"task_completion": (0.2, 0.9)}
    deltas = {
        name: {"original": o, "replayed": r, "delta": round(r - o, 4)}
        for name, (o, r) in metrics.items()
    }
    score = engine.score_case(
        case=case,
        kind=kind,
        outcome=outcome,
        candidate_read=candidate_read,
        deltas=deltas,
        verifier_answered=False,
        rule_metric="task_completion",
        trigger_metric=None,
        retire_on_metrics=list(retire_on),
        margins=engine.Margins(),
    )
    decided = {
        "deciding_metric": score.deciding_metric,
        "attribution": list(score.attribution),
        "regressed": score.regressed,
        "improved": score.improved,
    }
    pinned = {
        "deciding_metric": deciding_metric,
        "attribution": attribution,
        "regressed": regressed,
        "improved": improved,
    }
    decided.update({k: v for k, v in pinned.items() if v is not _ENGINE})
    return {
        "case": case,
        "kind": kind,
        "replay_session": f"replay-{case}",
        "candidate_read": candidate_read,
        "outcome": outcome,
        "metrics": deltas,
        "retire_on": list(retire_on),
        **decided,
        "error": None,
    }


def replay_case(rule: Rule, round_id: int, evidence: dict, *, at=T0):
    return journal.write(
        type=EventType.VALIDATION_REPLAY_CASE,
        actor="engine",
        rule_id=rule.id,
        round_id=round_id,
        evidence=evidence,
        at=at,
    )


def verdict(
    rule: Rule | str, round_id: int, outcome: str, *, validator="replay", reason="", **extra
):
    rule_id = rule if isinstance(rule, str) else rule.id
    return journal.write(
        type=EventType.VALIDATION_VERDICT,
        actor="engine",
        rule_id=rule_id,
        round_id=round_id,
        at=T0,
        evidence={
            "outcome": outcome,
            "validator": validator,
            "reason": reason,
            "pending_reason": extra.pop("pending_reason", None),
            "round_budget_exhausted": extra.pop("round_budget_exhausted", False),
            "details": extra,
        },
    )


def make_round(queue: list[str], *, status: str = "finished", **fields) -> ValidationRound:
    fields.setdefault("started_at", T0)
    if status == "finished":
        fields.setdefault("finished_at", T0 + timedelta(seconds=3))
        fields.setdefault(
            "summary",
            {
                "decided": 0,
                "pending": 0,
                "promoted": 0,
                "retired": 0,
                "budget_exhausted": 0,
                "elapsed_s": 3.0,
            },
        )
    return ValidationRound.objects.create(queue=queue, status=status, **fields)


F001_EXTRACTION = {
    "expected": {
        "trigger": "when git push fails with non-fast-forward",
        "directive": "pull latest changes before pushing",
    },
    "extracted": {
        "trigger": "when a push is rejected as non-fast-forward",
        "directive": "fetch and rebase before pushing again",
    },
    "source_case": "F-001",
    "trigger": {
        "token_f1": 0.36,
        "semantic": 0.91,
        "diff": [("keep", "when"), ("delete", "git"), ("insert", "a"), ("keep", "push")],
    },
    "directive": {
        "token_f1": 0.2,
        "semantic": 0.84,
        "diff": [("delete", "pull"), ("insert", "fetch"), ("keep", "before"), ("keep", "pushing")],
    },
    "token_f1": 0.28,
    "semantic": 0.88,
    "signature_agreement": 1.0,
    "score": 0.97,
    "verdict": "match",
    "why": "same rule (p 0.97; semantic 0.88, signature 1.00)",
    "conflicts": [],
    "doubts": ["different acts"],
    "components": {
        "score": "probability that the extracted rule is the expected rule",
        "semantic": "embedding similarity of the wording; a component only",
        "signature_agreement": "how far the failure-mode atoms of both triggers agree",
        "token_f1": "share of words in common, the naive baseline; never decides",
    },
}

# The same comparison as the earlier, hand-weighted comparator stored it: no meanings, and a
# score that was no probability.
F001_EXTRACTION_BEFORE_CALIBRATION = {
    key: value for key, value in F001_EXTRACTION.items() if key not in ("components", "doubts")
} | {"score": 0.81, "why": "same meaning, reworded"}


def install_extraction_scoring(monkeypatch, *, for_rule=None, rows=()):
    """Stand in for lifecycle.selectors.extraction with the agreed shapes, so the
    dashboard's rendering is tested apart from the embedding model."""
    fake = types.ModuleType("lifecycle.selectors.extraction")
    fake.extraction_for_rule = lambda rule: (for_rule or {}).get(rule.id)
    fake.extraction_rows = lambda: list(rows)
    monkeypatch.setitem(sys.modules, "lifecycle.selectors.extraction", fake)
    return fake


def gate_result(*, lexical_broken=("S-022", "S-023", "NM-044"), signature_broken=()):
    def report(matcher, broken):
        prevented = ["F-001", "F-002", "F-003", "F-004", "F-005"]
        return {
            "matcher": matcher,
            "failures_prevented": len(prevented),
            "successes_broken": len(broken),
            "near_misses": 1 if matcher == "lexical" else 0,
            "precision": len(prevented) / (len(prevented) + len(broken)),
            "recall": 0.625 if matcher == "lexical" else 1.0,
            "verdict": "INCONCLUSIVE" if broken else "PASS",
            "fired": {
                "prevented": prevented,
                "broken": list(broken),
                "near_misses": ["NM-044"] if matcher == "lexical" else [],
            },
            "family_size": 8 if matcher == "lexical" else 5,
        }

    return {
        "lexical": report("lexical", lexical_broken),
        "signature": report("signature", signature_broken),
    }


# ---- real Celery workers (PostgreSQL + Redis tests) ------------------------------------------


def database_url(db) -> str:
    """The URL of the test database, for worker processes: `db` is a connection's settings."""
    user = db.get("USER") or ""
    auth = f"{user}:{db['PASSWORD']}@" if db.get("PASSWORD") else (f"{user}@" if user else "")
    return f"postgres://{auth}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


@contextmanager
def celery_workers(app, *, prefix: str, count: int, env: dict):
    """`count` solo-pool workers started from this checkout with `env` over the environment;
    yields once every one answers a ping, and stops them (by pid) afterwards."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "cauterweb", "worker", "--pool=solo"]
            + ["--without-heartbeat", "--without-mingle", "--without-gossip"]
            + ["-n", f"{prefix}-{n}@%h", "--loglevel=WARNING"],
            cwd=Path(__file__).resolve().parent.parent,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for n in range(1, count + 1)
    ]
    try:
        deadline = time.monotonic() + 60
        while len(app.control.ping(timeout=0.5) or []) < count:
            assert time.monotonic() < deadline, "the Celery workers did not come up"
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


def round_config(**overrides) -> RoundConfig:
    """A round's configuration with the defaults of semantics §16 and no backend; tests name
    only what they vary (timeouts, design, concurrency, looks per round…)."""
    fields = {
        "margins": engine.Margins(),
        "min_sessions": 5,
        "max_failing": 3,
        "max_wins": 2,
        "max_attempts": 3,
        "replay_timeout_s": 300.0,
        "env_wait_timeout_s": 0.0,
        "budget_s": 0,
        "backend": None,
        "verifier": None,
    }
    return RoundConfig(**(fields | overrides))


def sessions_in_arm(rule_id: str, arm: str, count: int, prefix: str = "s") -> list[str]:
    """The first `count` session ids `{prefix}-N` this installation assigns to `arm` of the
    candidate's randomized trial (semantics §20.1)."""
    from django.conf import settings

    from lifecycle.assignment import arm_for

    found, n = [], 0
    while len(found) < count:
        session_id = f"{prefix}-{n}"
        drawn = arm_for(
            rule_id,
            session_id,
            allocation=settings.CAUTERWEB_TRIAL_ALLOCATION,
            key=settings.SECRET_KEY.encode(),
        )
        if drawn == arm:
            found.append(session_id)
        n += 1
    return found


# --- the review queue and webhooks (docs/dashboard.md, docs/webhooks.md) ------------------------

UNCERTAIN_EXTRACTION = {
    **F001_EXTRACTION,
    "score": 0.52,
    "verdict": "uncertain",
    "why": "cannot tell (p 0.52)",
}


def uncertain_rule(rule_id: str, **fields) -> Rule:
    """A rule whose stored comparison the comparator is `uncertain` about (semantics §12), as
    the comparator engineer's verdict will store it, with its review item opened the way
    `rule_store_comparison` opens it."""
    from lifecycle import review_items

    fields.setdefault("comparison", UNCERTAIN_EXTRACTION)
    rule = make_rule(rule_id, source_case="F-001", **fields)
    review_items.open_extraction(rule, rule.comparison, now=T0)
    return rule


def suspected_duplicate(rule: Rule, of: Rule, *, at=T0) -> None:
    """What `rule_check_duplicate` does when the comparator says `rule` says the same as `of`."""
    Rule.objects.filter(pk=rule.pk).update(duplicate_of=of)
    journal.write(
        type=EventType.RULE_DUPLICATE_SUSPECTED,
        actor=rule.author,
        rule_id=rule.id,
        at=at,
        evidence={
            "duplicate_of": of.id,
            "other_state": of.state,
            "other": {"trigger": of.trigger, "directive": of.directive},
            "verdict": "match",
            "semantic": 0.93,
            "token_f1": 0.41,
            "signature_agreement": 1.0,
            "why": "same rule",
        },
    )


class Receiver:
    """A real HTTP server on a free local port. It answers each request with the next status
    of `answers` (the last one from then on) and keeps what it received."""

    def __init__(self, answers=(200,), headers=None):
        self.answers = list(answers)
        self.headers = headers or {}
        self.received: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                receiver.received.append(
                    {"headers": dict(self.headers), "body": self.rfile.read(length)}
                )
                status = receiver.answers[min(len(receiver.received), len(receiver.answers)) - 1]
                self.send_response(status)
                for key, value in receiver.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(b"ok" if status < 300 else b"not now")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class HarnessAnswer:
    """A remote harness's answer as `requests` returns it, signed back for the request it
    answers (docs/semantics.md#s14-5); `signed=False` leaves the signature off."""

    def __init__(self, session, request_data: bytes, *, signed: bool = True, key=None):
        import json

        from replay.backends import http

        self.content = json.dumps(session).encode()
        nonce = json.loads(request_data)["nonce"]
        signature = http.sign_answer(self.content, nonce, key=key) if signed else ""
        self.headers = {http.SIGNATURE_HEADER: signature} if signed else {}

    def raise_for_status(self):
        pass

    def json(self):
        import json

        return json.loads(self.content)
