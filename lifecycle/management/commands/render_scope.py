from lifecycle.management.base import JsonCommand
from lifecycle.scopes import render_scope, rule_as_dict, scope_rules


class Command(JsonCommand):
    help = (
        "Print a scope file as agents read it: active rules, then provisional ones (semantics §4)."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("scope")

    def handle(self, *args, **options):
        scope = options["scope"]
        active, candidates = scope_rules(scope)
        self.emit(
            {
                "scope": scope,
                "active": [rule_as_dict(r) for r in active],
                "candidates": [rule_as_dict(r) for r in candidates],
                "text": render_scope(scope),
            },
            render_scope(scope).rstrip("\n"),
        )
