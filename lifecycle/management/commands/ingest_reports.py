from lifecycle.corpus import ImportRejected, read_jsonl
from lifecycle.intake import ingest_reports
from lifecycle.management.base import JsonCommand, open_lines
from replay.kick import kicks_deferred


class Command(JsonCommand):
    help = "Ingest live session reports from a JSON Lines file, atomically (semantics §2, §15)."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("file", help="JSON Lines file, or - for stdin")

    def handle(self, *args, **options):
        # One round for the whole file, not one per report (semantics §9.1).
        with open_lines(options["file"]) as lines, kicks_deferred():
            try:
                result = ingest_reports(read_jsonl(lines), actor="cli")
            except ImportRejected as exc:
                self.reject(exc)
        self.emit(
            result.as_dict(),
            f"{result.created} created, {result.unchanged} unchanged, {result.updated} updated",
        )
