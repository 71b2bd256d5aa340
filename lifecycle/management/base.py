"""What every CauterWeb command shares (semantics §15): a human summary by default, one JSON
document with --json, and a non-zero exit with a clear message on bad input."""

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from lifecycle.validation import ImportRejected


class JsonCommand(BaseCommand):
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


def open_lines(path: str, *, binary: bool = False):
    """A file's lines, or stdin for '-'; a missing file is a clear CommandError. In `binary`
    mode the lines are bytes (a line that is not UTF-8 becomes a line error, not a crash) and
    the file's position can be read while iterating (for a progress bar)."""
    if path == "-":
        return sys.stdin.buffer if binary else sys.stdin
    try:
        if binary:
            return open(path, "rb")
        return open(path, encoding="utf-8", errors="strict", newline=None)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
