from pathlib import Path

from django.core.management.base import CommandError

from lifecycle.management.base import JsonCommand
from lifecycle.services.traces import import_traces
from traces.model import FORMATS, TraceRejected


class Command(JsonCommand):
    help = (
        "Import agent traces (OTLP JSON or protobuf with OpenTelemetry GenAI spans, OpenInference "
        "spans, a Langfuse export, an Inspect AI log) as trajectories, one per session, "
        "signatures derived (semantics §19, §15)."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("file", help="the trace file")
        parser.add_argument("--format", choices=FORMATS, help="detected when not given")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="overwrite stored trajectories whose content changed",
        )

    def handle(self, *args, **options):
        path = Path(options["file"])
        try:
            body = path.read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from None
        content_type = (
            "application/x-protobuf" if path.suffix in (".pb", ".binpb", ".protobuf") else ""
        )
        try:
            result = import_traces(
                body, fmt=options["format"], content_type=content_type, replace=options["replace"]
            )
        except TraceRejected as exc:
            self.reject(exc)
        self.emit(
            result.as_dict(),
            f"{result.created} created, {result.unchanged} unchanged, {result.updated} updated "
            f"({len(result.ids)} session(s) in {path.name})",
        )
