"""Dashboard routes: one view module per page family in dashboard/views/.

Rule ids and scopes travel as one escaped path segment (`segment` converter, see
dashboard/converters.py), so a `/` in either never breaks a link or a route. The navigation in
templates/base.html links to these names: overview, rule-list, round-list, corpus, scopes,
journal, packs, charts."""

from django.urls import path, re_path, register_converter

from .converters import SegmentConverter
from .views import corpus, journal, overview, packs, rounds, rules, scopes, traces_upload

register_converter(SegmentConverter, "segment")

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("rules/", rules.rule_list, name="rule-list"),
    path("rules/<segment:rule_id>/", rules.rule_detail, name="rule-detail"),
    path(
        "rules/<segment:rule_id>/samples.csv",
        rules.rule_samples_export,
        {"fmt": "csv"},
        name="rule-samples-csv",
    ),
    path(
        "rules/<segment:rule_id>/samples.json",
        rules.rule_samples_export,
        {"fmt": "json"},
        name="rule-samples-json",
    ),
    path("rules/<segment:rule_id>/replays/", rules.rule_replays, name="rule-replays"),
    path("rules/<segment:rule_id>/timeline/", rules.rule_timeline, name="rule-timeline"),
    path("rules/<segment:rule_id>/retire/", rules.rule_retire, name="rule-retire"),
    path("rules/<segment:rule_id>/requeue/", rules.rule_requeue, name="rule-requeue"),
    path("rounds/", rounds.round_list, name="round-list"),
    path("rounds/start/", rounds.round_start, name="round-start"),
    path("rounds/<int:round_id>/", rounds.round_detail, name="round-detail"),
    path("charts/", overview.charts, name="charts"),
    path("corpus/", corpus.trajectory_list, name="corpus"),
    path("corpus/upload/", traces_upload.trace_upload, name="trace-upload"),
    path("corpus/<segment:trajectory_id>/", corpus.trajectory_detail, name="trajectory-detail"),
    path("scopes/", scopes.scope_list, name="scopes"),
    path("scopes/<segment:scope>/", scopes.scope_detail, name="scope-detail"),
    path("journal/", journal.journal, name="journal"),
    re_path(r"^journal/export\.(?P<fmt>jsonl|csv)$", journal.journal_export, name="journal-export"),
    path("packs/", packs.pack_page, name="packs"),
    path("packs/export/", packs.pack_export, name="pack-export"),
    path("packs/import/", packs.pack_import, name="pack-import"),
    path("packs/import/confirm/", packs.pack_import_confirm, name="pack-import-confirm"),
]
