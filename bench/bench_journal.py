"""Journal page and export at scale: 1,000,000 journal events on PostgreSQL; median
server-side time of the journal page (newest, deep in the past, each filter) and export speed.

    python bench/bench_journal.py                      # postgres://root@127.0.0.1:5432/cw_dash
    DATABASE_URL=postgres://…/other python bench/bench_journal.py [--runs 30]
        [--rules 10000 --events 1000000]   # the seed's sizes, when it seeds

Uses the database bench_dashboard.py seeds (10,000 rules, 1,000,000 events; seeded here with
its seed() when missing). Each page goes through Django's test client (middleware, view, one
query, template; no network) `--runs` times after one warm-up. The page pages by keyset on
(at, id), so a page deep in the past costs what the newest one does; the script prints the plan
of that deep query to show it. Prints one line a figure.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

DEFAULT_URL = "postgres://root@127.0.0.1:5432/cw_dash"


def median_ms(client, url: str, runs: int) -> tuple[float, int, int]:
    """Median wall time in ms, number of queries, events shown."""
    from django.db import connection

    queries = []

    def count(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        response = client.get(url)
    assert response.status_code == 200, url
    assert response.context["filter_error"] is None, response.context["filter_error"]
    shown = len(response.context["page"].events)
    wall = []
    for _ in range(runs):
        start = time.perf_counter()
        assert client.get(url).status_code == 200
        wall.append((time.perf_counter() - start) * 1000)
    return statistics.median(wall), len(queries), shown


def export_rate(client, url: str) -> tuple[int, float]:
    start = time.perf_counter()
    response = client.get(url)
    lines = sum(chunk.count(b"\n") for chunk in response.streaming_content)
    return lines, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--rules", type=int, default=10_000, help="rules seeded when missing")
    parser.add_argument(
        "--events", type=int, default=1_000_000, help="journal events seeded when missing"
    )
    args = parser.parse_args()
    url = os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    if not url.startswith("postgres"):
        sys.exit("bench_journal needs PostgreSQL: set DATABASE_URL=postgres://…")
    import bench_dashboard

    bench_dashboard.ensure_database(url)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cauterweb.settings")
    # The test client speaks plain HTTP: without this every page is a redirect to https.
    os.environ.setdefault("CAUTERWEB_HTTPS", "false")
    import django

    django.setup()
    from django.test.utils import setup_test_environment

    # Lets the script read each response's context (events shown, filter error).
    setup_test_environment()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.db.models import Q
    from django.test import Client

    from dashboard.forms import JournalFilterForm
    from lifecycle.cursor import encode_cursor
    from lifecycle.models import JournalEvent, Rule
    from lifecycle.selectors import journal as selectors_journal

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    call_command("migrate", interactive=False, verbosity=0)
    if not Rule.objects.filter(pk="BR-00000").exists():
        bench_dashboard.seed(rules=args.rules, events=args.events)
    user, _ = User.objects.get_or_create(username="bench")
    client = Client()
    client.force_login(user)

    total = JournalEvent.objects.count()
    print(f"journal events: {total}")
    oldest = JournalEvent.objects.order_by("at", "id").first()
    # A cursor 100 events after the oldest: the last page anyone would reach by paging.
    deep = JournalEvent.objects.order_by("at", "id")[100:101].get()
    deep_cursor = encode_cursor(deep.at, deep.pk)
    middle = JournalEvent.objects.order_by("at", "id")[total // 2 : total // 2 + 1].get()
    rare_actor = JournalEvent.objects.exclude(actor="engine").values_list("actor", flat=True)[:1]
    day = middle.at.date().isoformat()
    pages = [
        ("journal, newest page", {}),
        (
            "journal, page at the middle of the journal",
            {"before": encode_cursor(middle.at, middle.pk)},
        ),
        ("journal, page next to the oldest event", {"before": deep_cursor}),
        ("journal, type=validation_verdict", {"type": "validation_verdict"}),
        (
            "journal, type=validation_verdict, deep",
            {"type": "validation_verdict", "before": deep_cursor},
        ),
        ("journal, rule=BR-00001", {"rule": "BR-00001"}),
        ("journal, round=50", {"round": "50"}),
        (f"journal, one day ({day})", {"since": day, "until": day}),
        (
            f"journal, actor={(rare_actor or ['engine'])[0]}",
            {"actor": (rare_actor or ["engine"])[0]},
        ),
        ("journal, htmx fragment, type=rule_added", {"type": "rule_added"}),
    ]
    for label, query in pages:
        path = "/journal/" + ("?" + urlencode(query) if query else "")
        ms, queries, shown = median_ms(client, path, args.runs)
        print(f"{label}: median {ms:.1f} ms, {queries} queries, {shown} events shown")

    filters = JournalFilterForm({}).filters()
    events = selectors_journal.journal_events(filters=filters)
    at, pk = deep.at, deep.pk
    sql_query = events.filter(Q(at__lt=at) | Q(at=at, pk__lt=pk), at__lte=at).order_by(
        "-at", "-id"
    )[:51]
    with connection.cursor() as cursor:
        sql, params = sql_query.query.sql_with_params()
        cursor.execute("EXPLAIN ANALYZE " + sql, params)
        plan = [row[0] for row in cursor.fetchall()]
    print("plan of the deep page:\n  " + "\n  ".join(plan[:8]))

    for label, query in [
        ("export JSONL, rule=BR-00001", {"rule": "BR-00001"}),
        ("export CSV, one day", {"since": day, "until": day}),
        ("export JSONL, type=validation_verdict", {"type": "validation_verdict"}),
    ]:
        fmt = "csv" if "CSV" in label else "jsonl"
        lines, seconds = export_rate(client, f"/journal/export.{fmt}?{urlencode(query)}")
        print(f"{label}: {lines} lines in {seconds:.2f} s ({lines / seconds:,.0f} lines/s)")
    print(f"oldest event: {oldest.at.isoformat()}")


if __name__ == "__main__":
    main()
