"""Dashboard routes (issue 5). One module per page family in lifecycle/views/.

The navigation in templates/base.html links to these names: overview, rule-list, round-list,
corpus, scopes, journal, packs, charts."""

from django.urls import path

from .views import overview, rules

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("rules/", rules.rule_list, name="rule-list"),
    path("rules/<str:rule_id>/", rules.rule_detail, name="rule-detail"),
    path("rules/<str:rule_id>/retire/", rules.rule_retire, name="rule-retire"),
    path("rules/<str:rule_id>/requeue/", rules.rule_requeue, name="rule-requeue"),
    path("charts/", overview.charts, name="charts"),
    # dashboard-2: corpus, scopes, journal, packs routes below.
]
