from pathlib import Path

from django.core.management.base import CommandError

from lifecycle.management.base import JsonCommand
from lifecycle.services.traces import import_logs, import_traces, is_agent_log
from traces.logs import FORMATS as LOG_FORMATS
from traces.model import FORMATS, TraceRejected
from traces.sources import DEFAULT_LIMITS, Limits

SKIPPED_SHOWN = 20


class Command(JsonCommand):
    help = (
        "Import agent traces (OTLP JSON or protobuf with OpenTelemetry GenAI spans, OpenInference "
        "spans, a Langfuse export, an Inspect AI log) or coding agents' own session logs (Claude "
        "Code, Codex CLI, OpenHands, SWE-agent and mini-SWE-agent: a file, a directory tree, or a "
        ".tar.gz/.zip of them) as trajectories, one per session, signatures derived, secrets "
        "redacted (semantics §19, §15)."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("file", help="the trace file, or a directory or archive of logs")
        parser.add_argument(
            "--format", choices=FORMATS + LOG_FORMATS, help="detected when not given"
        )
        parser.add_argument(
            "--replace",
            action="store_true",
            help="overwrite stored trajectories whose content changed (a session that went on)",
        )
        parser.add_argument(
            "--max-bytes",
            type=int,
            default=DEFAULT_LIMITS.max_total_bytes,
            help="refuse a source whose files expand past this many bytes in all",
        )

    def handle(self, *args, **options):
        path = Path(options["file"])
        if not path.exists():
            raise CommandError(f"cannot read {path}: no such file or directory")
        try:
            if is_agent_log(path, fmt=options["format"]):
                self._logs(path, options)
                return
            self._trace(path, options)
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from None
        except TraceRejected as exc:
            self.reject(exc)

    def _logs(self, path: Path, options) -> None:
        limits = Limits(max_total_bytes=options["max_bytes"])
        done = import_logs(path, fmt=options["format"], replace=options["replace"], limits=limits)
        for name, why in done.skipped[:SKIPPED_SHOWN]:
            self.stderr.write(f"skipped {name}: {why}")
        if len(done.skipped) > SKIPPED_SHOWN:
            self.stderr.write(f"… and {len(done.skipped) - SKIPPED_SHOWN} more skipped")
        result = done.result
        self.emit(
            result.as_dict(),
            f"{result.created} created, {result.unchanged} unchanged, {result.updated} updated "
            f"({done.files} file(s) read, {len(done.skipped)} skipped)",
        )

    def _trace(self, path: Path, options) -> None:
        body = path.read_bytes()
        content_type = (
            "application/x-protobuf" if path.suffix in (".pb", ".binpb", ".protobuf") else ""
        )
        result = import_traces(
            body, fmt=options["format"], content_type=content_type, replace=options["replace"]
        )
        self.emit(
            result.as_dict(),
            f"{result.created} created, {result.unchanged} unchanged, {result.updated} updated "
            f"({len(result.ids)} session(s) in {path.name})",
        )
