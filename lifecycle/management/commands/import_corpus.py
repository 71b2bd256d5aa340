import os
from contextlib import contextmanager

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
        with open_lines(options["file"]) as lines, self._progress(lines) as step:
            try:
                result = import_corpus(lines, replace=options["replace"], progress=step)
            except ImportRejected as exc:
                self.reject(exc)
        self.emit(
            result.as_dict(),
            f"{result.created} created, {result.unchanged} unchanged, {result.updated} updated",
        )

    @contextmanager
    def _progress(self, handle):
        """A progress bar in bytes of the file, on a terminal only: never in --json output, a
        pipe or a log."""
        if self._json or not self.stdout.isatty() or not handle.seekable():
            yield None
            return
        from tqdm import tqdm

        size = os.fstat(handle.fileno()).st_size
        with tqdm(total=size, unit="B", unit_scale=True, desc="import", leave=False) as bar:
            yield lambda _line: bar.update(handle.tell() - bar.n)
