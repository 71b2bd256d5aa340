from django.core.management.base import CommandError

from lifecycle.management.base import JsonCommand
from lifecycle.services.packs import PackRejected, import_pack, preview_pack
from lifecycle.states import Actor


class Command(JsonCommand):
    help = (
        "Import a rule pack (YAML or JSON): everything is validated before anything is written; "
        "rules arrive as candidates, their exported evidence shown but not trusted (semantics §13)."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("file", help="the pack file")
        parser.add_argument(
            "--dry-run", action="store_true", help="validate and show the plan, write nothing"
        )
        parser.add_argument(
            "--reviewer", default="cli", help="the reviewer recorded as importing it"
        )

    def handle(self, *args, **options):
        try:
            with open(options["file"], encoding="utf-8") as pack:
                text = pack.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {options['file']}: {exc}") from None
        if options["dry_run"]:
            preview = preview_pack(text)
            if preview.errors:
                self._refuse(preview.errors)
            plan = [
                f"{r['action']:>9}  {r['id']}  {r['trigger']}" for r in preview.as_dict()["rules"]
            ]
            self.emit(preview.as_dict(), "\n".join(plan) or "(no rules)")
            return
        try:
            result = import_pack(text, actor=Actor.reviewer(options["reviewer"]))
        except PackRejected as exc:
            self._refuse(exc.errors)
        self.emit(
            result,
            f"{result['created']} created, {result['unchanged']} unchanged, "
            f"{result['updated']} updated (as candidates)",
        )

    def _refuse(self, errors):
        if self._json:
            self.emit({"error": "rejected", "errors": [e.as_dict() for e in errors]}, "")
        raise CommandError(
            f"{len(errors)} error(s), nothing imported:\n" + "\n".join(map(str, errors)),
            returncode=1,
        )
