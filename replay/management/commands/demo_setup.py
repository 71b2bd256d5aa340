"""Set up the demo on whatever database is configured: migrate, load the demo corpus, reports
and candidates shipped in lifecycle/fixtures/demo/, run the live sessions of two randomized
forward trials (they read the rule tool, then report), validate to standstill, record one more
candidate and give it one round (it stays pending for more samples), and make a demo reviewer
login. Safe to run again: every load is idempotent.

The corpus arrives the way a user's traces do: as an OpenTelemetry export (corpus.otlp.json,
written from corpus.jsonl by traces.export) imported by `import_traces`, so every
session's signature is derived from its spans (semantics §19), not hand-written."""

import json
import random
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

import lifecycle
from lifecycle.journal import EventType
from lifecycle.models import JournalEvent, Rule
from lifecycle.scopes import rule_tool_read
from lifecycle.services.candidates import candidates_record
from lifecycle.services.reports import reports_ingest
from lifecycle.services.traces import import_traces
from lifecycle.signals import one_announcement
from lifecycle.states import Actor
from lifecycle.validation import ImportRejected, numbered, read_jsonl
from replay.rounds import round_run, run_until_settled
from traces.model import TraceRejected

DEMO_DIR = Path(lifecycle.__file__).resolve().parent / "fixtures" / "demo"
# Recorded after the standstill, looked at by one round (candidates_arriving.jsonl).
ARRIVING = "C-014"
LOOK_TRIES = 50
DEMO_USER = "demo"
DEMO_PASSWORD = "demo"


def session_breached(rng: random.Random, spec: dict, served: list[str]) -> bool:
    """Whether a demo trial session breached: `base`, moved by the effect of each candidate it
    was served (trial_sessions.json)."""
    return rng.random() < spec["base"] + sum(spec["effects"].get(rule, 0.0) for rule in served)


class Command(BaseCommand):
    help = "Load the demo corpus, validate to standstill, create the demo login (demo/demo)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--no-input", action="store_true", help="never prompt (kept for scripts)"
        )
        parser.add_argument("--skip-validate", action="store_true", help="load data only")
        parser.add_argument("--timeout", type=float, default=300.0, help="standstill timeout (s)")
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="URL to print")

    def handle(self, *args, **options):
        call_command("migrate", interactive=False, verbosity=0)
        self._ensure_groups_and_user()
        try:
            # The loads below each ask for a round; one request for all of them, once every
            # file is in, so no round decides a candidate before the live reports arrive.
            with one_announcement():
                self._load(
                    "corpus.otlp.json",
                    lambda lines: import_traces(lines.read().encode(), fmt="otlp"),
                )
                self._load(
                    "reports_history.jsonl",
                    lambda rows: reports_ingest(read_jsonl(rows), actor="demo"),
                )
                self._load(
                    "candidates.jsonl",
                    lambda rows: candidates_record(
                        read_jsonl(rows), actor=Actor.extractor("demo-extractor")
                    )[0],
                )
                self._load(
                    "reports_live.jsonl",
                    lambda rows: reports_ingest(read_jsonl(rows), actor="demo"),
                )
                self._load(
                    "candidates_trials.jsonl",
                    lambda rows: candidates_record(
                        read_jsonl(rows), actor=Actor.extractor("demo-extractor")
                    )[0],
                )
                self._trial_sessions()
                # Recorded after the live reports, so its forward trial has no sessions yet.
                self._load(
                    "candidates_late.jsonl",
                    lambda rows: candidates_record(
                        read_jsonl(rows), actor=Actor.extractor("demo-extractor")
                    )[0],
                )
        except (ImportRejected, TraceRejected) as exc:
            raise CommandError(f"the demo data is broken: {exc}") from None
        if not options["skip_validate"]:
            result = run_until_settled(timeout_s=options["timeout"])
            states = Counter(rule["state"] for rule in result["rules"])
            pending = Counter(r["pending_reason"] for r in result["rules"] if r["pending_reason"])
            self.stdout.write(
                f"validated to standstill in {result['rounds']} round(s): "
                + ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
                + "".join(f"; {n} pending: {reason}" for reason, n in sorted(pending.items()))
            )
        self._arriving(look=not options["skip_validate"])
        self.stdout.write(
            self.style.SUCCESS(
                f"\nCauterWeb demo ready: {options['url']}  (login: {DEMO_USER} / {DEMO_PASSWORD})\n"
            )
        )

    def _arriving(self, *, look: bool) -> None:
        """A candidate that arrives after the standstill gets one round: one look of its paired
        replays (semantics §17.3). Its effect is real but thin, so it stays pending for more
        samples until the next round."""
        with one_announcement():
            self._load(
                "candidates_arriving.jsonl",
                lambda rows: candidates_record(
                    read_jsonl(rows), actor=Actor.extractor("demo-extractor")
                )[0],
            )
        if not look:
            return
        for _ in range(LOOK_TRIES):
            # With eager Celery the recording's kick has run that round already.
            if JournalEvent.objects.filter(
                rule_id=ARRIVING, type=EventType.VALIDATION_VERDICT
            ).exists():
                break
            if round_run(kicked_by="demo") is None:  # a worker's round holds the lock
                time.sleep(0.2)
        rule = Rule.objects.get(pk=ARRIVING)
        said = rule.pending_text if rule.is_candidate else rule.verdict_reason
        self.stdout.write(f"{ARRIVING} arrived after the standstill: {rule.state}, {said}")

    def _trial_sessions(self) -> None:
        """Live sessions for the randomized trials (semantics §20): each reads the scope
        through the rule tool — and so is assigned to each candidate's arm — then reports
        whether it breached, more or less often by the effect of what it was served. The arms
        depend on this installation's key, the breaches on a fixed seed; either way the good
        candidate's trial promotes it and the harmful one's retires it."""
        spec = json.loads((DEMO_DIR / "trial_sessions.json").read_text(encoding="utf-8"))
        rng = random.Random(spec["seed"])
        start = datetime.fromisoformat(spec["start"])
        lines = []
        for n in range(spec["sessions"]):
            session_id = f"release-{n:03d}"
            at = start + timedelta(minutes=n * spec["every_minutes"])
            served = rule_tool_read(scope=spec["scope"], session_id=session_id, now=at)
            breached = session_breached(rng, spec, [r["id"] for r in served])
            lines.append(
                {
                    "session_id": session_id,
                    "at": at.isoformat(),
                    "notices": ["breach:task_completion"] if breached else [],
                    "metrics": {"task_completion": 0.35 if breached else 0.9},
                    "rules_read": [r["id"] for r in served],
                }
            )
        result = reports_ingest(numbered(lines), actor="demo")
        self.stdout.write(
            f"{spec['sessions']} live sessions read scope {spec['scope']} and reported: "
            f"{result.created} created, {result.unchanged} unchanged"
        )

    def _ensure_groups_and_user(self) -> None:
        reviewers, _ = Group.objects.get_or_create(name="reviewers")
        Group.objects.get_or_create(name="viewers")
        user = User.objects.filter(username=DEMO_USER).first()
        if user is None:
            user = User.objects.create_user(DEMO_USER, password=DEMO_PASSWORD)
        user.groups.add(reviewers)
        # The demo's one user also administers it: the webhooks page is staff's.
        if not user.is_staff:
            user.is_staff = True
            user.save(update_fields=["is_staff"])

    def _load(self, name: str, load) -> None:
        path = DEMO_DIR / name
        if not path.exists():
            return
        with path.open(encoding="utf-8") as lines:
            result = load(lines)
        self.stdout.write(
            f"{name}: {result.created} created, {result.unchanged} unchanged, {result.updated} updated"
        )
