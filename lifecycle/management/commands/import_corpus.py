from lifecycle.management.base import JsonCommand, open_lines
from lifecycle.services.corpus import import_corpus
from lifecycle.validation import ImportRejected


class Command(JsonCommand):
    help = "Import a JSON Lines corpus of trajectories, atomically (semantics §2, §15)."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("file", help="JSON Lines file, or - for stdin")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="overwrite stored trajectories whose content changed",
        )

    def handle(self, *args, **options):
        with open_lines(options["file"]) as lines:
            try:
                result = import_corpus(lines, replace=options["replace"])
            except ImportRejected as exc:
                self.reject(exc)
        self.emit(
            result.as_dict(),
            f"{result.created} created, {result.unchanged} unchanged, {result.updated} updated",
        )
