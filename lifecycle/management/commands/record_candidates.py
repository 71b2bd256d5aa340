from lifecycle.management.base import JsonCommand, open_lines
from lifecycle.services.candidates import candidates_record
from lifecycle.states import Actor
from lifecycle.validation import ImportRejected, read_jsonl


class Command(JsonCommand):
    help = "Record candidate rules from a JSON Lines file, atomically (semantics §3, §15)."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("file", help="JSON Lines file, or - for stdin")
        parser.add_argument(
            "--author",
            default="extractor",
            help="recorded as the candidates' author (default: extractor)",
        )

    def handle(self, *args, **options):
        with open_lines(options["file"]) as lines:
            try:
                result, _ = candidates_record(
                    read_jsonl(lines), actor=Actor.extractor(options["author"])
                )
            except ImportRejected as exc:
                self.reject(exc)
        self.emit(
            result.as_dict(),
            f"{result.created} created, {result.unchanged} unchanged, {result.updated} updated",
        )
