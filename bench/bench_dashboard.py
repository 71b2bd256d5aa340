"""Dashboard render times at scale: 10,000 rules and 1,000,000 journal
events on PostgreSQL, median server-side render time of the rules page, a rule page and its
folds, the review queue (a third of the candidates waiting in it) and the overview.

    python bench/bench_dashboard.py                    # postgres://root@127.0.0.1:5432/cw_dash
    DATABASE_URL=postgres://…/other python bench/bench_dashboard.py [--reseed] [--runs 30]

The first run creates the database, migrates it, loads the demo corpus (so the corpus gate has
real trajectories to run over) and seeds rules, rounds and journal events with COPY; later runs
reuse the seed. Each page is rendered through Django's test client (middleware, view, queries,
template; no network) `--runs` times after one warm-up. Prints one line a figure.
"""

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFAULT_URL = "postgres://root@127.0.0.1:5432/cw_dash"
T0 = datetime(2026, 6, 1, tzinfo=UTC)
SCOPES = ["global", "git", "ci", "docker", "http", "python", "repo:payments", "deploy"]
METRICS = ["task_completion", "tool_correctness", "coherence", "outcome_correct"]
PENDING = ["trial_in_progress", "no_matching_replayable_case", "replay_inconclusive", ""]
STEP_TYPES = [
    "validation_candidate_started",
    "validation_replay_case",
    "validation_replay_case",
    "validation_replay_case",
    "validation_verdict",
]


def ensure_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1].split("?")[0]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1].split("?")[0]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def rule_state(i: int) -> tuple[str, str]:
    """(state, pending_reason) of seeded rule i: a third each, candidates with every reason."""
    state = ("candidate", "active", "retired")[i % 3]
    return state, PENDING[(i // 3) % len(PENDING)] if state == "candidate" else ""


def case_evidence(i: int, rule_id: str) -> str:
    original = (i % 50) / 100
    replayed = min(1.0, original + ((i % 7) - 3) / 20)
    return json.dumps(
        {
            "case": f"F-{i % 40 + 1:03d}",
            "kind": "failing" if i % 4 else "win",
            "replay_session": f"replay:{rule_id}:{i}",
            "candidate_read": True,
            "outcome": "scored",
            "metrics": {
                "task_completion": {
                    "original": original,
                    "replayed": replayed,
                    "delta": round(replayed - original, 4),
                },
                "coherence": {"original": 0.8, "replayed": 0.71, "delta": -0.09},
            },
            "deciding_metric": "task_completion",
            "retire_on": ["outcome_correct", "task_completion"],
            "attribution": [
                {
                    "metric": "coherence",
                    "delta": -0.09,
                    "decision": "not_attributable",
                    "why": "not in retire_on",
                }
            ],
            "regressed": False,
            "improved": replayed - original >= 0.05,
            "error": None,
        }
    )


def seed(*, rules: int, events: int) -> None:
    from django.db import connection

    from lifecycle.services.corpus import import_corpus

    corpus = Path(__file__).resolve().parent.parent / "lifecycle/fixtures/demo/corpus.jsonl"
    import_corpus(corpus.read_text().splitlines(keepends=True))
    rounds = max(1, events // rules)
    ids = [f"BR-{i:05d}" for i in range(rules)]
    started = time.perf_counter()
    with connection.cursor() as cursor:
        raw = cursor.connection
        with raw.cursor().copy(
            "COPY lifecycle_rule (id, trigger, directive, scope, metric, signature, tags, state,"
            " author, author_kind, source_case, source_notice, provenance, content_hash,"
            " recorded_at, baseline_rate, baseline_sessions, baseline_hits, replay_attempts,"
            " pending_reason, first_attempted_at, last_validator, verdict_reason, decided_at,"
            " trial_sessions) FROM STDIN"
        ) as copy:
            for i, rule_id in enumerate(ids):
                state, pending = rule_state(i)
                decided = state != "candidate"
                copy.write_row(
                    (
                        rule_id,
                        f"when git push fails with non-fast-forward (variant {i})",
                        f"pull the latest changes with rebase before pushing again ({i})",
                        SCOPES[i % len(SCOPES)],
                        METRICS[i % len(METRICS)],
                        json.dumps(["tool:git", "action:git.push", "error:non_fast_forward"]),
                        json.dumps(["bench"]),
                        state,
                        "bench-extractor",
                        "extractor",
                        "F-001" if i % 10 == 0 else "",
                        "",
                        "{}",
                        rule_id,
                        T0 + timedelta(minutes=i),
                        0.8,
                        40,
                        32,
                        i % 4,
                        pending,
                        None if pending == "" and state == "candidate" else T0,
                        "replay" if decided else "",
                        "improved task_completion by +0.40 on F-001" if decided else "",
                        T0 + timedelta(minutes=i + 1) if decided else None,
                        0,
                    )
                )
        with raw.cursor().copy(
            "COPY replay_validationround (id, started_at, finished_at, status, queue, budget_s,"
            " replay_wired, summary, error, kicked_by, progress, worker) FROM STDIN"
        ) as copy:
            for r in range(1, rounds + 1):
                copy.write_row(
                    (
                        r,
                        T0 + timedelta(hours=r),
                        T0 + timedelta(hours=r, seconds=40),
                        "finished",
                        json.dumps(ids[(r * 50) % rules :][:50]),
                        60.0,
                        True,
                        json.dumps(
                            {
                                "decided": 10,
                                "pending": 40,
                                "promoted": 6,
                                "retired": 4,
                                "budget_exhausted": 0,
                                "elapsed_s": 40.0,
                            }
                        ),
                        "",
                        "bench",
                        "{}",
                        "bench",
                    )
                )
        with raw.cursor().copy(
            "COPY lifecycle_journalevent (type, at, rule_id, round_id, actor, evidence) FROM STDIN"
        ) as copy:
            written = 0
            for i, rule_id in enumerate(ids):
                copy.write_row(
                    (
                        "rule_added",
                        T0 + timedelta(minutes=i),
                        rule_id,
                        None,
                        "bench-extractor",
                        '{"baseline": {"rate": 0.8}}',
                    )
                )
                written += 1
            for n in range(events - 2 * rules):
                i = n % rules
                round_id = n // rules + 1
                kind = STEP_TYPES[round_id % len(STEP_TYPES)]
                if kind == "validation_replay_case":
                    evidence = case_evidence(n, ids[i])
                elif kind == "validation_verdict":
                    evidence = (
                        '{"outcome": "pending", "validator": "replay", "reason": "", '
                        '"pending_reason": "replay_inconclusive", "round_budget_exhausted": false}'
                    )
                else:
                    evidence = '{"validator": "replay", "replay_attempts": 1}'
                copy.write_row(
                    (
                        kind,
                        T0 + timedelta(hours=round_id, microseconds=i),
                        ids[i],
                        round_id,
                        "engine",
                        evidence,
                    )
                )
                written += 1
            for i, rule_id in enumerate(ids):
                state, _ = rule_state(i)
                kind = {"active": "rule_promoted", "retired": "rule_retired"}.get(
                    state, "validation_verdict"
                )
                copy.write_row(
                    (
                        kind,
                        T0 + timedelta(days=30, minutes=i),
                        rule_id,
                        None,
                        "engine",
                        json.dumps({"from": "candidate", "to": state, "reason": "bench"}),
                    )
                )
                written += 1
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('replay_validationround', 'id'), %s)", [rounds]
        )
        cursor.execute("ANALYZE")
    print(
        f"seeded {rules} rules, {written} journal events, {rounds} rounds "
        f"in {time.perf_counter() - started:.1f} s"
    )


def seed_review() -> None:
    """A third of the candidates waiting in the review queue (undecided after their replay
    budget), as the journal writer would have opened them; once."""
    from django.db.models import Q

    from lifecycle.models import ReviewItem, Rule
    from lifecycle.review_items import Opening

    if ReviewItem.objects.exists():
        return
    rules = (
        Rule.objects.filter(state="candidate")
        .filter(~Q(id__endswith="1"))
        .values_list("id", "scope")
    )
    items = [
        ReviewItem(
            key=Opening("inconclusive", rule_id).key,
            kind="inconclusive",
            rule_id=rule_id,
            scope=scope,
            opened_at=T0 + timedelta(seconds=i),
        )
        for i, (rule_id, scope) in enumerate(rules)
        if i % 3 == 0
    ]
    ReviewItem.objects.bulk_create(items, batch_size=2000)


def median_ms(client, url: str, runs: int, **headers) -> tuple[float, float, float, int]:
    """Medians in ms of the wall time, the CPU time of this process (the Django side) and the
    time spent waiting on the database, and the number of queries. On a busy machine the wall
    time mostly measures the wait for a CPU; CPU + database is what an idle one would show."""
    from django.db import connection

    db_ms = []

    def timed(execute, sql, params, many, context):
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            db_ms[-1].append((time.perf_counter() - start) * 1000)

    wall, cpu = [], []
    with connection.execute_wrapper(timed):
        for run in range(runs + 1):
            db_ms.append([])
            start, start_cpu = time.perf_counter(), time.process_time()
            response = client.get(url, **headers)
            assert response.status_code == 200, url
            if run:  # the first run warms caches
                wall.append((time.perf_counter() - start) * 1000)
                cpu.append((time.process_time() - start_cpu) * 1000)
    queries = len(db_ms[0])
    db = [sum(times) for times in db_ms[1:]]
    return statistics.median(wall), statistics.median(cpu), statistics.median(db), queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rules", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--reseed", action="store_true", help="drop the database and seed again")
    args = parser.parse_args()
    url = os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    if not url.startswith("postgres"):
        sys.exit("bench_dashboard needs PostgreSQL: set DATABASE_URL=postgres://…")
    if args.reseed:
        drop_database(url)
    ensure_database(url)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cauterweb.settings")
    # The test client speaks plain HTTP: without this every page is a redirect to https.
    os.environ.setdefault("CAUTERWEB_HTTPS", "false")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.test import Client

    from lifecycle.models import JournalEvent, ReviewItem, Rule
    from replay.models import ValidationRound

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    call_command("migrate", interactive=False, verbosity=0)
    if not Rule.objects.filter(pk="BR-00000").exists():
        seed(rules=args.rules, events=args.events)
    seed_review()
    user, _ = User.objects.get_or_create(username="bench")
    user.groups.add(Group.objects.get_or_create(name="reviewers")[0])
    client = Client()
    client.force_login(user)

    print(f"rules: {Rule.objects.count()}, journal events: {JournalEvent.objects.count()}")
    # The rule with the most history: every seeded rule has ~events/rules events.
    busy = "BR-00001"
    htmx = {"HTTP_HX_REQUEST": "true"}
    ground_truth = "BR-00010"  # source case F-001 carries an expected_rule
    # Round 50, or the last one of a tiny seed (one round per events/rules).
    round_id = min(50, ValidationRound.objects.count())
    pages = [
        ("rules page (default)", "/rules/", {}),
        (
            "rules page, filtered + sorted, page 3",
            "/rules/?state=candidate&scope=git&q=variant&sort=-attempts&page=3",
            {},
        ),
        (
            "rules table fragment (htmx)",
            "/rules/?state=active&sort=id&page=40",
            {"HTTP_HX_REQUEST": "true"},
        ),
        (
            f"rule page {busy} ({JournalEvent.objects.filter(rule_id=busy).count()} events)",
            f"/rules/{busy}/",
            {},
        ),
        (f"rule page {ground_truth} (with extraction diff)", f"/rules/{ground_truth}/", {}),
        (f"rule page {busy}: per-replay fold (htmx)", f"/rules/{busy}/replays/", htmx),
        (f"rule page {busy}: timeline fold (htmx)", f"/rules/{busy}/timeline/", htmx),
        (f"review queue ({ReviewItem.objects.count()} open items)", "/review/", {}),
        ("review queue, one scope (htmx)", "/review/?scope=git", htmx),
        ("round page", f"/rounds/{round_id}/", {}),
        ("overview", "/", {}),
    ]
    for label, url_, headers in pages:
        wall, cpu, db, queries = median_ms(client, url_, args.runs, **headers)
        print(
            f"{label}: median {wall:.1f} ms wall = {cpu:.1f} ms Django CPU + {db:.1f} ms"
            f" database + waiting, over {args.runs} runs, {queries} queries"
        )
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
