"""The journal page and its exports (semantics §10): filters by type, rule, round, actor
and time; keyset pages that stay index-friendly; JSON Lines and CSV exports of what is filtered;
bad parameters give a message, never a 500."""

import csv
import io
import json
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dashboard.forms import JournalFilterForm
from lifecycle import cursor
from lifecycle.journal import write as journal_write
from lifecycle.models import JournalEvent
from lifecycle.selectors import journal as selectors_journal
from lifecycle.validation import FilterError
from tests.builders import T0, candidate

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
RESTORE = {"HTTP_HX_HISTORY_RESTORE_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    # The personas' passwords are hashed once per test; the real hasher costs seconds on CI.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def events():
    """A small journal: two rules, one round, an agent and a reviewer, over two days."""
    push = candidate("R-PUSH", now=T0)
    hook = candidate("R-HOOK", trigger="when a hook fails", signature=["error:hook"], now=T0)
    write = [
        ("validation_round_started", None, 7, "engine", T0 + timedelta(hours=1)),
        ("validation_verdict", push.id, 7, "engine", T0 + timedelta(hours=1, minutes=1)),
        ("rule_retired_by_reviewer", hook.id, None, "rita", T0 + timedelta(days=1)),
        ("report_received", None, None, "=cmd|' /C calc'!A0", T0 + timedelta(days=1, hours=2)),
    ]
    for type_, rule_id, round_id, actor, at in write:
        journal_write(
            type=type_,
            actor=actor,
            rule_id=rule_id,
            round_id=round_id,
            at=at,
            evidence={"reason": f"{type_} happened"},
        )


def shown(response) -> list[str]:
    return [e.type for e in response.context["page"].events]


# --- Filters -----------------------------------------------------------------------------------


def test_the_journal_needs_a_login(client):
    assert client.get(reverse("journal")).status_code == 302
    assert client.get(reverse("journal-export", args=["csv"])).status_code == 302


def test_it_shows_the_newest_events_first(viewer_client, events):
    response = viewer_client.get(reverse("journal"))
    assert shown(response) == [
        "report_received",
        "rule_retired_by_reviewer",
        "validation_verdict",
        "validation_round_started",
        "rule_added",
        "rule_added",
    ]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"type": "rule_added"}, ["rule_added", "rule_added"]),
        ({"rule": "R-HOOK"}, ["rule_retired_by_reviewer", "rule_added"]),
        ({"round": "7"}, ["validation_verdict", "validation_round_started"]),
        ({"actor": "rita"}, ["rule_retired_by_reviewer"]),
        ({"since": "2026-11-02"}, ["report_received", "rule_retired_by_reviewer"]),
        # A bare `until` date includes that whole day.
        ({"until": "2026-11-01", "type": "validation_verdict"}, ["validation_verdict"]),
        (
            {"since": "2026-11-01T13:00:30Z", "until": "2026-11-02T12:00:01+00:00"},
            ["rule_retired_by_reviewer", "validation_verdict"],
        ),
        ({"type": "rule_promoted"}, []),
    ],
)
def test_it_filters_events(viewer_client, events, query, expected):
    assert shown(viewer_client.get(reverse("journal"), query)) == expected


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"type": "Rule Added; DROP"}, "type"),
        ({"round": "seven"}, "round"),
        ({"round": "-1"}, "round"),
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-13-45"}, "until"),
        ({"since": "2026-11-02", "until": "2026-11-01T00:00:00Z"}, "since"),
        ({"actor": "x" * 151}, "actor"),
        ({"before": "garbage"}, "before"),
        ({"after": "2026-11-01T12:00:00+00:00~"}, "after"),
        (
            {"before": "2026-11-01T12:00:00+00:00~1", "after": "2026-11-01T12:00:00+00:00~1"},
            "before",
        ),
    ],
)
def test_a_bad_parameter_shows_a_message_not_a_500(viewer_client, events, query, field):
    response = viewer_client.get(reverse("journal"), query)
    assert response.status_code == 200
    assert response.context["filter_error"].field == field
    assert f"Bad filter <strong>{field}</strong>" in response.content.decode()
    assert shown(response) == []


def test_an_htmx_request_gets_only_the_table_fragment(viewer_client, events):
    response = viewer_client.get(reverse("journal"), {"actor": "rita"}, **HTMX)
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="journal-table"')
    assert "HX-Request" in response["Vary"]


@pytest.mark.parametrize(
    ("shown", "headers", "pushed"),
    [
        # Enter in a filter field sends on `change`, then on `submit` for the URL the first
        # request pushed: that one pushes nothing more (docs/dashboard.md#history).
        ("http://testserver/journal/?type=rule_promoted&rule=R-PUSH", {}, "false"),
        # A new filter is pushed as the form says; so is a header that is no URL (no 500).
        ("http://testserver/journal/?type=rule_promoted", {}, None),
        ("http://[::1/journal/", {}, None),
        ("http://testserver/journal/?type=rule_promoted&rule=R-PUSH", RESTORE, None),
    ],
    ids=["same-url", "new-url", "not-a-url", "history-restore"],
)
def test_a_filter_sent_twice_puts_one_entry_in_the_history(
    viewer_client, events, shown, headers, pushed
):
    response = viewer_client.get(
        reverse("journal"),
        {"type": "rule_promoted", "rule": "R-PUSH"},
        HTTP_HX_CURRENT_URL=shown,
        **HTMX,
        **headers,
    )
    assert response.status_code == 200
    assert response.get("HX-Push-Url") == pushed


def test_an_empty_journal_says_so(viewer_client):
    assert "The journal is empty" in viewer_client.get(reverse("journal")).content.decode()


def test_events_link_to_their_rule_and_round(viewer_client, events):
    body = viewer_client.get(reverse("journal"), {"round": "7"}).content.decode()
    assert f'href="{reverse("rule-detail", args=["R-PUSH"])}"' in body
    assert f'href="{reverse("round-detail", args=[7])}"' in body


# --- Keyset pages ------------------------------------------------------------------------------


@pytest.fixture
def many_events():
    """130 events, ten of them sharing one timestamp so the id breaks the tie."""
    for i in range(130):
        at = T0 + timedelta(seconds=min(i, 60))
        journal_write(type="report_received", actor="engine", at=at, evidence={"n": i})
    return list(JournalEvent.objects.order_by("-at", "-id").values_list("evidence__n", flat=True))


def test_pages_walk_the_whole_journal_without_gaps_or_repeats(viewer_client, many_events):
    seen, query = [], {}
    while True:
        page = viewer_client.get(reverse("journal"), query).context["page"]
        seen += [e.evidence["n"] for e in page.events]
        if not page.older:
            break
        query = {"before": page.older}
    assert seen == many_events
    assert len(seen) == 130


def test_newer_walks_back_to_the_newest_page(viewer_client, many_events):
    first = viewer_client.get(reverse("journal")).context["page"]
    second = viewer_client.get(reverse("journal"), {"before": first.older}).context["page"]
    assert second.newer
    back = viewer_client.get(reverse("journal"), {"after": second.newer}).context["page"]
    assert [e.pk for e in back.events] == [e.pk for e in first.events]
    assert back.newer is None  # that was the newest page


def test_page_links_keep_the_filters(viewer_client, many_events):
    body = viewer_client.get(reverse("journal"), {"actor": "engine"}).content.decode()
    assert "?actor=engine&amp;before=" in body


def test_a_page_is_one_query_however_deep_and_however_big_the_journal(viewer_client, many_events):
    def queries(query) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert viewer_client.get(reverse("journal"), query).status_code == 200
        return len(ctx.captured_queries)

    first = viewer_client.get(reverse("journal")).context["page"]
    small = queries({})
    assert queries({"before": first.older}) == small
    for i in range(200):
        journal_write(type="report_received", actor="engine", at=T0 + timedelta(hours=2, seconds=i))
    assert queries({"type": "report_received", "before": first.older}) == small


def test_the_page_query_orders_by_the_index_and_never_counts_or_offsets(many_events):
    # One million events must stay fast: no COUNT(*), no OFFSET, ORDER BY the (at, id) index.
    filters = JournalFilterForm({}).filters()
    with CaptureQueriesContext(connection) as ctx:
        page = selectors_journal.journal_page(
            selectors_journal.journal_events(filters=filters),
            before=cursor.encode_cursor(T0, 999999),
        )
    assert page.events
    (query,) = ctx.captured_queries
    sql = query["sql"].upper()
    assert "COUNT(" not in sql and "OFFSET" not in sql
    assert 'ORDER BY "LIFECYCLE_JOURNALEVENT"."AT" DESC, "LIFECYCLE_JOURNALEVENT"."ID" DESC' in sql
    # The plain bound the index range starts from; the (at, id) OR alone gives the planner none.
    assert '"LIFECYCLE_JOURNALEVENT"."AT" <=' in sql


def test_a_journal_position_is_the_api_cursor(viewer_client, many_events):
    page = viewer_client.get(reverse("journal")).context["page"]
    last = page.events[-1]
    assert cursor.decode_cursor(page.older, (datetime, int)) == (last.at, last.pk)
    # The same text pages the API, which walks oldest first: it resumes just past that event.
    ordered = list(JournalEvent.objects.order_by("at", "id").values_list("id", flat=True))
    api_page = viewer_client.get("/api/v1/journal", {"cursor": page.older, "limit": 2}).json()
    following = ordered[ordered.index(last.pk) + 1 :][:2]
    assert [item["id"] for item in api_page["items"]] == following


# --- Exports -----------------------------------------------------------------------------------


def exported(response) -> str:
    assert response.status_code == 200
    assert response.streaming
    return b"".join(response.streaming_content).decode()


def test_the_jsonl_export_has_every_filtered_event_oldest_first(viewer_client, events):
    response = viewer_client.get(reverse("journal-export", args=["jsonl"]), {"round": "7"})
    assert response["Content-Type"].startswith("application/x-ndjson")
    assert 'attachment; filename="cauterweb-journal-' in response["Content-Disposition"]
    rows = [json.loads(line) for line in exported(response).splitlines()]
    assert [(r["type"], r["rule"], r["round"], r["actor"]) for r in rows] == [
        ("validation_round_started", None, 7, "engine"),
        ("validation_verdict", "R-PUSH", 7, "engine"),
    ]
    assert rows[1]["evidence"] == {"reason": "validation_verdict happened"}
    assert rows[1]["at"] == "2026-11-01T13:01:00+00:00"
    assert set(rows[0]) == {"id", "type", "at", "rule", "round", "actor", "evidence"}


def test_the_csv_export_has_a_header_and_json_evidence(viewer_client, events):
    response = viewer_client.get(reverse("journal-export", args=["csv"]), {"actor": "rita"})
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported(response))))
    assert len(rows) == 1
    assert rows[0]["type"] == "rule_retired_by_reviewer"
    assert rows[0]["rule"] == "R-HOOK"
    assert rows[0]["round"] == ""
    assert json.loads(rows[0]["evidence"]) == {"reason": "rule_retired_by_reviewer happened"}


def test_the_csv_export_neutralises_spreadsheet_formulas(viewer_client, events):
    response = viewer_client.get(
        reverse("journal-export", args=["csv"]), {"type": "report_received"}
    )
    (row,) = csv.DictReader(io.StringIO(exported(response)))
    assert row["actor"] == "'=cmd|' /C calc'!A0"


def test_an_export_with_a_bad_filter_is_a_400_with_the_message(viewer_client, events):
    response = viewer_client.get(reverse("journal-export", args=["csv"]), {"since": "soon"})
    assert response.status_code == 400
    assert "Bad filter since" in response.content.decode()


def test_an_unknown_export_format_is_a_404(viewer_client):
    assert viewer_client.get("/journal/export.xml").status_code == 404


def test_the_export_links_carry_the_filters_but_not_the_page_position(viewer_client, many_events):
    first = viewer_client.get(reverse("journal")).context["page"]
    response = viewer_client.get(reverse("journal"), {"actor": "engine", "before": first.older})
    body = response.content.decode()
    assert f'href="{reverse("journal-export", args=["csv"])}?actor=engine"' in body


def test_the_export_reads_in_chunks_in_one_query_per_chunk(viewer_client, many_events):
    with CaptureQueriesContext(connection) as ctx:
        body = exported(viewer_client.get(reverse("journal-export", args=["jsonl"])))
    assert len(body.splitlines()) == 130
    exports = [q for q in ctx.captured_queries if "lifecycle_journalevent" in q["sql"]]
    assert len(exports) == 1


def test_filters_ignore_unknown_keys_and_parse_what_they_keep():
    cleaned = JournalFilterForm(
        {"round": "12", "since": "2026-11-03T09:00:00", "page": "4"}
    ).filters()
    assert cleaned["round_id"] == 12
    assert cleaned["since_at"].isoformat() == "2026-11-03T09:00:00+00:00"
    assert "page" not in cleaned


def test_a_bad_filter_names_its_field():
    with pytest.raises(FilterError) as exc:
        JournalFilterForm({"until": "tomorrow"}).filters()
    assert exc.value.field == "until"
