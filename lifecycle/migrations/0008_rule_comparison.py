"""Extraction scores stored on the rule (semantics §12), computed after commit from now on; the
rules already recorded are scored here, once, so their pages keep showing them."""

import logging

from django.db import migrations, models

log = logging.getLogger(__name__)


def score_recorded_rules(apps, schema_editor):
    Rule = apps.get_model("lifecycle", "Rule")
    Trajectory = apps.get_model("lifecycle", "Trajectory")
    rules = list(Rule.objects.exclude(source_case="").values_list("id", "source_case", "trigger", "directive"))
    expected = dict(
        Trajectory.objects.filter(pk__in={r[1] for r in rules}, expected_rule__isnull=False)
        .values_list("id", "expected_rule")
    )
    rows = [(rid, (case, t, d, expected[case])) for rid, case, t, d in rules if case in expected]
    if not rows:
        return
    from comparison.semantic import ComparatorUnavailable
    from lifecycle.selectors.extraction import scores_against_expected

    try:
        scores = scores_against_expected([row for _, row in rows])
    except ComparatorUnavailable as exc:
        log.warning("extraction scores of recorded rules skipped: %s", exc)
        return
    for (rule_id, _), comparison in zip(rows, scores, strict=True):
        Rule.objects.filter(pk=rule_id).update(comparison=comparison)


class Migration(migrations.Migration):

    dependencies = [
        ('lifecycle', '0007_enrolment_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='rule',
            name='comparison',
            field=models.JSONField(blank=True, default=None, null=True),
        ),
        migrations.RunPython(score_recorded_rules, migrations.RunPython.noop),
    ]
