"""Dashboard routes. One module per page family in lifecycle/views/.

The navigation in templates/base.html links to these names: overview, rule-list, round-list,
corpus, scopes, journal, packs, charts."""

from django.urls import path, re_path

from .views import corpus, journal, overview, packs, rules, scopes

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("rules/", rules.rule_list, name="rule-list"),
    path("rules/<str:rule_id>/", rules.rule_detail, name="rule-detail"),
    path("rules/<str:rule_id>/retire/", rules.rule_retire, name="rule-retire"),
    path("rules/<str:rule_id>/requeue/", rules.rule_requeue, name="rule-requeue"),
    path("charts/", overview.charts, name="charts"),
    # dashboard-2: corpus, scopes, journal, packs routes below.
    path("corpus/", corpus.trajectory_list, name="corpus"),
    path("corpus/<str:trajectory_id>/", corpus.trajectory_detail, name="trajectory-detail"),
    path("scopes/", scopes.scope_list, name="scopes"),
    path("scopes/<str:scope>/", scopes.scope_detail, name="scope-detail"),
    path("journal/", journal.journal, name="journal"),
    re_path(r"^journal/export\.(?P<fmt>jsonl|csv)$", journal.journal_export, name="journal-export"),
    path("packs/", packs.pack_page, name="packs"),
    path("packs/export/", packs.pack_export, name="pack-export"),
    path("packs/import/", packs.pack_import, name="pack-import"),
    path("packs/import/confirm/", packs.pack_import_confirm, name="pack-import-confirm"),
]
