from django.core.management.base import CommandError

from lifecycle.management.base import JsonCommand
from lifecycle.models import TokenRole
from lifecycle.services.tokens import InvalidToken, token_create


class Command(JsonCommand):
    help = "Create an API token and print it once; only its SHA-256 is stored."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("name", help="names the token's actor in the journal")
        parser.add_argument("--role", required=True, choices=TokenRole.values)

    def handle(self, *args, **options):
        try:
            issued = token_create(name=options["name"], role=options["role"], actor="cli")
        except InvalidToken as exc:
            raise CommandError(str(exc), returncode=1) from None
        token = issued.token
        self.emit(
            {"name": token.name, "role": token.role, "token": issued.key, "prefix": token.prefix},
            f"{issued.key}\n\nToken {token.name!r} ({token.role}). Store it now: it is not "
            "shown again. Use it as 'Authorization: Bearer <token>'.",
        )
