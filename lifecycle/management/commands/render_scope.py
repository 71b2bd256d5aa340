from django.utils import timezone

from lifecycle.management.base import JsonCommand
from lifecycle.scopes import render_scope, rule_as_dict, scope_rules, served_candidates


class Command(JsonCommand):
    help = (
        "Print a scope file as agents read it: active rules, then the provisional ones the "
        "reader is served (semantics §4, §20)."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("scope")
        parser.add_argument(
            "--session",
            default="",
            help="read as this session: under randomized trials it is assigned to each "
            "candidate's arm and served the candidates of its treatment arms (semantics §20.1)",
        )

    def handle(self, *args, **options):
        scope, session_id, now = options["scope"], options["session"].strip(), timezone.now()
        text = render_scope(scope, session_id=session_id, now=now)
        active, candidates = scope_rules(scope)
        served = served_candidates(candidates, session_id=session_id, now=now)
        self.emit(
            {
                "scope": scope,
                "active": [rule_as_dict(r) for r in active],
                "candidates": [rule_as_dict(r) for r in served],
                "text": text,
            },
            text.rstrip("\n"),
        )
