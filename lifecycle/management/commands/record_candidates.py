from lifecycle.corpus import ImportRejected, read_jsonl
from lifecycle.intake import record_candidates
from lifecycle.management.base import JsonCommand, open_lines
from lifecycle.states import Actor
from replay.kick import kicks_deferred


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
        # One round for the whole file, not one per candidate (semantics §9.1).
        with open_lines(options["file"]) as lines, kicks_deferred():
            try:
                result, _ = record_candidates(
                    read_jsonl(lines), actor=Actor.extractor(options["author"])
                )
            except ImportRejected as exc:
                self.reject(exc)
        self.emit(
            result.as_dict(),
            f"{result.created} created, {result.unchanged} unchanged, {result.updated} updated",
        )
