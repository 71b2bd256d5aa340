"""Report intake (semantics §2, §8, §15): the one write path of a report, for the command line,
the API and the demo alike.

`reports_ingest` takes a batch in ONE transaction: the reports (idempotent on session and
time), their rule reads, a `report_received` event each, and their sessions' trial outcomes
(below: `sessions_report`); a validation round is asked for on commit. Every bad line is
reported with its number and field, and nothing is written unless every line is good.
"""

from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from .. import bulk, journal, signals
from ..atoms import notice_metric
from ..inputs import ReportIn, line_fields
from ..journal import EventType
from ..metrics import Registry, current_registry
from ..models import Exposure, Report, Rule, RuleRead, RuleState, TrialEnrolment
from ..validation import ImportRejected, ImportResult, LineError, content_hash


def parse_report(number: int, obj: object) -> tuple[dict | None, list[LineError]]:
    """One line's fields, checked by `ReportIn`, or the line's errors."""
    line, errors = line_fields(ReportIn, number, obj)
    if errors:
        return None, errors
    fields = {**line.__dict__, "has_notice": bool(line.notices)}
    fields["content_hash"] = content_hash({**fields, "at": line.at.isoformat()})
    return fields, []


Parsed = dict[tuple[str, datetime], tuple[int, dict]]


def reports_parse(rows) -> Parsed:
    """(session_id, at) → (line, fields); raises ImportRejected naming every bad line. Reads
    nothing: whether the rules read exist is checked where the reports are stored."""
    parsed: dict[tuple[str, datetime], tuple[int, dict]] = {}
    errors: list[LineError] = []
    for number, obj, error in rows:
        fields, line_errors = (None, [error]) if error else parse_report(number, obj)
        if line_errors:
            errors.extend(line_errors)
            continue
        key = (fields["session_id"], fields["at"])
        if key in parsed and parsed[key][1]["content_hash"] != fields["content_hash"]:
            errors.append(
                LineError(
                    number,
                    "at",
                    f"session {key[0]} already has another report at this time "
                    f"on line {parsed[key][0]}",
                )
            )
            continue
        parsed[key] = (number, fields)
    if errors:
        raise ImportRejected(errors)
    return parsed


def refuse_unknown_rules(parsed: Parsed) -> None:
    """Raise ImportRejected naming every line that reads a rule never recorded."""
    named = {rid for _, f in parsed.values() for rid in f["rules_read"]}
    if not named:
        return
    known = set(Rule.objects.filter(pk__in=named).order_by().values_list("id", flat=True))
    unknown = [
        LineError(n, "rules_read", f"unknown rule {rid!r}")
        for n, f in parsed.values()
        for rid in f["rules_read"]
        if rid not in known
    ]
    if unknown:
        raise ImportRejected(unknown)


def reports_ingest(rows, *, actor: str = "harness", now: datetime | None = None) -> ImportResult:
    """Take in session reports (semantics §2): store them with their rule reads and events, and
    record what their sessions showed in the forward trials (§8, §20), all or nothing. A report
    sent again with other content replaces the stored one. One round is asked for on commit.
    Raises ImportRejected naming every bad line."""
    parsed = reports_parse(rows)
    now = now or timezone.now()
    with transaction.atomic():
        result, touched = _store(parsed, actor=actor, now=now)
        if touched:
            sessions_report(reports=touched, now=now)
            signals.announce("report")
    return result


REPORT_COLUMNS = (
    "session_id",
    "at",
    "notices",
    "metrics",
    "rules_read",
    "has_notice",
    "content_hash",
    "received_at",
)


def _store(parsed: Parsed, *, actor: str, now: datetime) -> tuple[ImportResult, list[Report]]:
    """Store the reports not stored as they are; (result, the reports stored or changed).

    New reports go in with one INSERT that leaves the stored ones alone (the usual report is
    new: one round trip); only reports sent before are read back, to tell the unchanged from
    those sent again with other content."""
    result = ImportResult()
    rows = [[*(fields[c] for c in REPORT_COLUMNS[:-1]), now] for _, fields in parsed.values()]
    ids = dict(
        bulk.insert_new_rows(
            Report,
            REPORT_COLUMNS,
            rows,
            unique=("session_id", "at"),
            returning=("content_hash", "id"),
        )
    )
    new, again = [], {}
    for key, (_, fields) in parsed.items():
        pk = ids.get(fields["content_hash"])
        if pk is None:
            again[key] = fields
        else:
            new.append(Report(pk=pk, **fields, received_at=now))
    changed = _replace(again, now=now, result=result) if again else []
    touched = new + changed
    if touched:
        _record_reads(parsed, touched)
        journal.write_many([_received(r, actor=actor, now=now) for r in touched])
    result.created, result.updated = len(new), len(changed)
    result.ids = [str(r.pk) for r in touched]
    return result, touched


def _replace(again: dict, *, now: datetime, result: ImportResult) -> list[Report]:
    """Reports stored before: those sent again with other content are replaced (returned)."""
    sessions = {key[0] for key in again}
    stored = {(r.session_id, r.at): r for r in Report.objects.filter(session_id__in=sessions)}
    changed = []
    for key, fields in again.items():
        existing = stored[key]
        if existing.content_hash == fields["content_hash"]:
            result.unchanged += 1
            continue
        for name, value in fields.items():
            setattr(existing, name, value)
        existing.received_at = now
        changed.append(existing)
    if changed:
        Report.objects.bulk_update(changed, [*REPORT_COLUMNS[2:]])
    return changed


def _record_reads(parsed: Parsed, reports: list[Report]) -> None:
    """The rule reads the reports declare (semantics §5), written for the rules that exist by
    one INSERT … SELECT; when some rule does not, ImportRejected names the lines (and the
    transaction takes the reports back)."""
    at = RuleRead._meta.get_field("at")
    rows = [
        (r.session_id, rule_id, at.get_db_prep_save(r.at, connection), "report")
        for r in reports
        for rule_id in r.rules_read
    ]
    read, rule = RuleRead._meta.db_table, Rule._meta.db_table
    written = 0
    with connection.cursor() as cursor:
        for start in range(0, len(rows), bulk.BATCH):
            chunk = rows[start : start + bulk.BATCH]
            values = ", ".join(["(%s, %s, %s, %s)"] * len(chunk))
            cursor.execute(
                f"INSERT INTO {read} (session_id, rule_id, at, via) "
                f"SELECT column1, column2, column3, column4 FROM (VALUES {values}) AS v "
                f"WHERE column2 IN (SELECT id FROM {rule})",
                [value for row in chunk for value in row],
            )
            written += cursor.rowcount
    if written != len(rows):
        refuse_unknown_rules(parsed)


def _received(report: Report, *, actor: str, now: datetime) -> journal.Event:
    """A report_received event: the report as it was sent."""
    return journal.event(
        type=EventType.REPORT_RECEIVED,
        at=now,
        actor=actor,
        evidence={
            "session_id": report.session_id,
            "at": report.at.isoformat(),
            "notices": report.notices,
            "metrics": report.metrics,
            "rules_read": report.rules_read,
        },
    )


# ---- the forward trials ------------------------------------------------------------------
# What a report's session showed, written into the forward trials: the part of report intake
# (`lifecycle.services.reports.reports_ingest`) that touches trials, in its transaction.
#
# Under the `randomized` trial design (semantics §20) a report writes the outcome of its own
# session's exposures — the candidates whose arms the session was assigned to when it read
# their scope — found by the session index: one UPDATE, whatever the number of candidates in
# force. A session that never read a candidate's scope is in no trial; its report feeds the
# baselines only. Under `baseline` (semantics §8) every report enrols its session:
#
# a report costs the same with a hundred candidates in force or ten thousand: each rule keeps the
# number of sessions enrolled in its trial (`Rule.trial_sessions`, kept by database triggers),
# so a session is enrolled only in the candidates still short of sessions (the partial index
# `rule_open_trials`), and its earlier enrolments are flipped through the session index. The
# flips are conditional UPDATEs, not writes of values read before: two reports of one session
# taken in at once cannot undo each other's flip. Both statements are plain SQL that SQLite and
# PostgreSQL run alike (an INSERT … SELECT and an UPDATE … FROM, which the ORM cannot write): a
# report is a handful of round trips, and each one is felt by a busy host.


def hit_names(notices: Iterable[str], registry: Registry) -> list[str]:
    """Every metric name (with its aliases) the notices hit: a rule whose metric is among them
    showed its target condition."""
    names: set[str] = set()
    for metric in {notice_metric(atom) for atom in notices} - {""}:
        names |= registry.family(metric)
    return sorted(names)


def _sessions(reports: list[Report]) -> dict[str, dict]:
    """The reports' sessions in the order of their first report, each with every notice and
    every rule read over its reports of the batch, and the metrics of its latest ones."""
    sessions: dict[str, dict] = {}
    for report in sorted(reports, key=lambda r: (r.at, r.pk or 0)):
        seen = sessions.setdefault(
            report.session_id, {"notices": set(), "read": set(), "metrics": {}}
        )
        seen["notices"].update(report.notices)
        seen["read"].update(report.rules_read)
        seen["metrics"].update(report.metrics)
    return sessions


def sessions_report(*, reports: list[Report], now: datetime) -> None:
    """Write what the reports' sessions showed into the forward trials. Runs in the
    transaction that stored the reports; sessions in the order of their first report, so a
    §8 trial that fills up takes the earlier ones."""
    randomized = settings.CAUTERWEB_TRIAL_DESIGN == "randomized"
    registry = None
    for session_id, seen in _sessions(reports).items():
        if registry is None and (seen["notices"] or (randomized and seen["metrics"])):
            registry = current_registry()
        hit = hit_names(seen["notices"], registry) if seen["notices"] else []
        any_notice = bool(seen["notices"])
        if randomized:
            values = _values(seen["metrics"], registry) if seen["metrics"] else []
            _outcomes(session_id, hit=hit, any_notice=any_notice, values=values, now=now)
        else:
            _enrol(session_id, hit=hit, any_notice=any_notice, read=seen["read"], now=now)


# The deciding metric of a rule with no metric of its own, where a report carries it (§6).
OUTCOME_METRIC = "outcome_correct"


def _values(metrics: dict[str, float], registry: Registry) -> list[tuple[list[str], float]]:
    """(metric names, value): each metric of the report with its family, for the rules whose
    metric is one of those names; `[""]` stands for the rules with no metric (§20.3)."""
    values = [(sorted(registry.family(name)), value) for name, value in sorted(metrics.items())]
    if OUTCOME_METRIC in metrics:
        values.append(([""], metrics[OUTCOME_METRIC]))
    return values


# A literal, not a parameter: SQLite uses the partial index rule_open_trials only when the
# query's condition visibly implies the index's.
_CANDIDATE = f"'{RuleState.CANDIDATE.value}'"


def _in(column: str, values: list[str]) -> str:
    """`column IN (…)` for as many parameters; false for none (never NULL)."""
    return f"{column} IN ({', '.join(['%s'] * len(values))})" if values else "1 = 0"


def _enrol(session_id: str, *, hit: list[str], any_notice: bool, read: set[str], now) -> None:
    """Every report, healthy or not, enrols its session while fewer than
    `rule_trial_min_sessions` sessions are enrolled; an enrolled session can still flip to
    breached (or to having read the candidate) by a later report.

    Two statements, the same on both databases: the flips of the session's enrolments (found
    by the session index), then its enrolment in the open trials (found by the partial index),
    where a session already enrolled is left to the flips."""
    enrolment, rule = TrialEnrolment._meta.db_table, Rule._meta.db_table
    read = sorted(read)
    shows = f"CASE WHEN r.metric = '' THEN %s ELSE {_in('r.metric', hit)} END"
    shows_params = [any_notice, *hit]
    reads = _in("r.id", read)
    with connection.cursor() as cursor:
        if any_notice or read:
            cursor.execute(
                f"UPDATE {enrolment} SET breached = {enrolment}.breached OR {shows}, "
                f"read_candidate = {enrolment}.read_candidate OR {reads}, updated_at = %s "
                f"FROM {rule} r WHERE r.id = {enrolment}.rule_id "
                f"AND {enrolment}.session_id = %s AND r.state = {_CANDIDATE} "
                f"AND ((NOT {enrolment}.breached AND {shows}) "
                f"OR (NOT {enrolment}.read_candidate AND {reads}))",
                [*shows_params, *read, now, session_id, *shows_params, *read],
            )
        cursor.execute(
            f"INSERT INTO {enrolment} "
            "(rule_id, session_id, breached, read_candidate, enrolled_at, updated_at) "
            f"SELECT r.id, %s, {shows}, {reads}, %s, %s FROM {rule} r "
            f"WHERE r.state = {_CANDIDATE} AND r.trial_sessions < %s "
            "ON CONFLICT (rule_id, session_id) DO NOTHING",
            [
                session_id,
                *shows_params,
                *read,
                now,
                now,
                settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS,
            ],
        )


def _outcomes(session_id: str, *, hit: list[str], any_notice: bool, values, now) -> None:
    """The session's outcome in each trial it was exposed to (semantics §20.3): reported from
    its first report on, breached once any report showed the candidate's target condition,
    and the deciding metric's value of its latest report that carried it. One UPDATE through
    the session index; trials already decided are left as they were decided."""
    exposure, rule = Exposure._meta.db_table, Rule._meta.db_table
    shows = f"CASE WHEN r.metric = '' THEN %s ELSE {_in('r.metric', hit)} END"
    params: list = [now, any_notice, *hit]
    value = ""
    if values:
        cases = " ".join(f"WHEN {_in('r.metric', names)} THEN %s" for names, _ in values)
        value = f", value = CASE {cases} ELSE {exposure}.value END"
        params += [p for names, v in values for p in (*names, v)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {exposure} SET reported_at = COALESCE({exposure}.reported_at, %s), "
            f"breached = {exposure}.breached OR {shows}{value} "
            f"FROM {rule} r WHERE r.id = {exposure}.rule_id "
            f"AND {exposure}.session_id = %s AND r.state = {_CANDIDATE}",
            [*params, session_id],
        )
