from django.core.management.base import CommandError

from lifecycle.management.base import JsonCommand
from lifecycle.services.packs import PackRejected, seal_pack


class Command(JsonCommand):
    help = (
        "Re-seal a rule pack you edited by hand: recompute its checksum (semantics §13) so that "
        "import_pack accepts it. The pack is validated first, as an import would; a pack with "
        "errors is not sealed. Writes the file in place unless -o is given."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("file", help="the pack file (YAML or JSON)")
        parser.add_argument("-o", "--output", help="write the sealed pack here instead")

    def handle(self, *args, **options):
        path = options["file"]
        try:
            with open(path, encoding="utf-8") as pack:
                text = pack.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {path}: {exc}") from None
        try:
            sealed = seal_pack(text)
        except PackRejected as exc:
            if self._json:
                self.emit({"error": "rejected", "errors": [e.as_dict() for e in exc.errors]}, "")
            raise CommandError(
                f"{len(exc.errors)} error(s), not sealed:\n" + "\n".join(map(str, exc.errors)),
                returncode=1,
            ) from None
        out = options["output"] or path
        try:
            with open(out, "w", encoding="utf-8") as target:
                target.write(sealed.text)
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror}") from None
        changed = sealed.previous != sealed.checksum
        self.emit(
            {
                "output": out,
                "checksum": sealed.checksum,
                "previous": sealed.previous,
                "changed": changed,
            },
            f"sealed {out}: {sealed.checksum}"
            + (f" (was {sealed.previous})" if changed else " (unchanged)"),
        )
