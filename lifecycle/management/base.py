"""What every CauterWeb command shares (semantics §15): a human summary by default, one JSON
document with --json, and a non-zero exit with a clear message on bad input."""

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from lifecycle.validation import ImportRejected


class JsonCommand(BaseCommand):
    # Agents and scripts call these commands, often many times a minute: Django's system
    # checks (URLs, admin, templates) import the whole web stack and the API first, about a
    # third of a second of CPU a call for nothing these commands use. `manage.py check` runs
    # them, and the deploy runs `check --deploy`.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print one JSON document")

    def execute(self, *args, **options):
        self._json = options.get("json", False)
        return super().execute(*args, **options)

    def emit(self, document, human: str) -> None:
        if self._json:
            self.stdout.write(json.dumps(document, indent=2, default=str))
        else:
            self.stdout.write(human)

    def reject(self, exc: ImportRejected):
        """Every bad line on stderr (and in the JSON document), then exit 1."""
        if self._json:
            self.stdout.write(
                json.dumps(
                    {"error": "rejected", "errors": [e.as_dict() for e in exc.errors]}, indent=2
                )
            )
        raise CommandError(str(exc), returncode=1)


def open_lines(path: str):
    """A file's lines as bytes, or stdin's for '-'; a missing file is a clear CommandError.
    Bytes, not text: each line is decoded on its own (`validation.read_jsonl`), so invalid
    UTF-8 is an error naming its line instead of a traceback in the middle of the file, and
    only a line feed ends a line (a form feed or U+2028 inside a JSON string does not)."""
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
