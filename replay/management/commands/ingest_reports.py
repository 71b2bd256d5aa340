from lifecycle.management.base import JsonCommand, open_lines
from lifecycle.services.reports import reports_ingest
from lifecycle.validation import ImportRejected, read_jsonl


class Command(JsonCommand):
    help = "Ingest live session reports from a JSON Lines file, atomically (semantics §2, §15)."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("file", help="JSON Lines file, or - for stdin")

    def handle(self, *args, **options):
        with open_lines(options["file"]) as lines:
            try:
                result = reports_ingest(read_jsonl(lines), actor="cli")
            except ImportRejected as exc:
                self.reject(exc)
        self.emit(
            result.as_dict(),
            f"{result.created} created, {result.unchanged} unchanged, {result.updated} updated",
        )
