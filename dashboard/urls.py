"""Dashboard routes: one view module per page family in dashboard/views/.

Rule ids and scopes travel as one escaped path segment (`segment` converter, see
dashboard/converters.py), so a `/` in either never breaks a link or a route. The navigation in
templates/base.html links to these names: overview, review, rule-list, round-list, corpus,
scopes, journal, packs, charts, and webhooks for staff."""

from django.urls import path, re_path, register_converter

from .converters import SegmentConverter
from .views import (
    corpus,
    journal,
    overview,
    packs,
    review,
    rounds,
    rules,
    scopes,
    traces_upload,
    webhooks,
)

register_converter(SegmentConverter, "segment")

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("review/", review.review_queue, name="review"),
    path("review/<int:item_id>/<slug:action>/", review.review_action, name="review-action"),
    path(
        "review/extraction-labels.jsonl", review.extraction_labels_export, name="extraction-labels"
    ),
    path("review/packs/<int:pack_id>/", review.staged_pack, name="staged-pack"),
    path("webhooks/", webhooks.webhook_list, name="webhooks"),
    path("webhooks/<int:endpoint_id>/", webhooks.webhook_detail, name="webhook-detail"),
    path("webhooks/<int:endpoint_id>/test/", webhooks.webhook_test, name="webhook-test"),
    path("webhooks/<int:endpoint_id>/secret/", webhooks.webhook_secret, name="webhook-secret"),
    path(
        "webhooks/deliveries/<uuid:delivery_id>/resend/",
        webhooks.delivery_resend,
        name="webhook-resend",
    ),
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
    path("corpus/families/propose/", corpus.family_propose, name="family-propose"),
    path("corpus/<segment:trajectory_id>/", corpus.trajectory_detail, name="trajectory-detail"),
    path("scopes/", scopes.scope_list, name="scopes"),
    path("scopes/<segment:scope>/", scopes.scope_detail, name="scope-detail"),
    path("journal/", journal.journal, name="journal"),
    re_path(r"^journal/export\.(?P<fmt>jsonl|csv)$", journal.journal_export, name="journal-export"),
    path("packs/", packs.pack_page, name="packs"),
    path("packs/export/", packs.pack_export, name="pack-export"),
    path("packs/import/", packs.pack_import, name="pack-import"),
    path("packs/import/confirm/", packs.pack_import_confirm, name="pack-import-confirm"),
    path("packs/stage/", packs.pack_stage, name="pack-stage"),
]
