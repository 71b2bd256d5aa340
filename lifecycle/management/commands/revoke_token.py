from django.core.management.base import CommandError

from lifecycle.management.base import JsonCommand
from lifecycle.services.tokens import TokenNotFound, token_revoke


class Command(JsonCommand):
    help = "Revoke an API token by name; it is refused from then on."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("name")

    def handle(self, *args, **options):
        name = options["name"]
        try:
            revoked = token_revoke(name=name, actor="cli")
        except TokenNotFound:
            raise CommandError(f"no token named {name!r}", returncode=1) from None
        self.emit(
            {"name": name, "revoked": revoked},
            f"Token {name!r} revoked." if revoked else f"Token {name!r} was already revoked.",
        )
