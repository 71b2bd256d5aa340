from django.core.management.base import CommandError

from lifecycle.management.base import JsonCommand
from lifecycle.models import RuleState
from lifecycle.services.packs import (
    AGENT_FILE_FORMATS,
    PACK_FORMATS,
    InvalidSelection,
    export_agent_files,
    export_pack,
    withheld_duplicates,
)


class Command(JsonCommand):
    help = (
        "Export rules as a pack (YAML or JSON, active rules by default), or the active rules of "
        "one scope as AGENTS.md / CLAUDE.md / a Cursor rule (semantics §13). Run `validate "
        "--until-settled` first for a settled rule set (semantics §9.4)."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--scope", action="append", help="repeatable; default: all scopes")
        parser.add_argument(
            "--state", action="append", choices=RuleState.values, help="repeatable; default: active"
        )
        parser.add_argument(
            "--format", default="yaml", choices=[*PACK_FORMATS, *AGENT_FILE_FORMATS]
        )
        parser.add_argument("--name", default="cauterweb", help="the pack's name")
        parser.add_argument("--pack-version", help="the pack's version (default: export time)")
        parser.add_argument("-o", "--output", help="write to this file instead of stdout")

    def handle(self, *args, **options):
        fmt, scopes = options["format"], options["scope"]
        try:
            if fmt in AGENT_FILE_FORMATS:
                if not scopes or len(scopes) != 1:
                    raise CommandError(f"--format {fmt} needs exactly one --scope", returncode=1)
                text = export_agent_files(scope=scopes[0], fmt=fmt)
            else:
                text = export_pack(
                    scopes=scopes,
                    states=options["state"] or ["active"],
                    fmt=fmt,
                    name=options["name"],
                    version=options["pack_version"],
                )
        except InvalidSelection as exc:
            raise CommandError(str(exc), returncode=1) from None
        states = ["active"] if fmt in AGENT_FILE_FORMATS else options["state"] or ["active"]
        withheld = withheld_duplicates(scopes=scopes, states=states)
        if withheld:
            # On stderr: stdout may be the pack itself.
            self.stderr.write(
                "left out, a suspected duplicate of a rule exported beside it (the review queue "
                "decides which stays): " + ", ".join(f"{r} (of {o})" for r, o in withheld)
            )
        report = {"format": fmt, "withheld": [{"rule": r, "duplicate_of": o} for r, o in withheld]}
        path = options["output"]
        if path:
            try:
                with open(path, "w", encoding="utf-8") as out:
                    out.write(text)
            except OSError as exc:
                raise CommandError(f"cannot write {path}: {exc.strerror}") from None
            self.emit({**report, "output": path}, f"wrote {fmt} to {path}")
        elif self._json:
            self.emit({**report, "text": text}, "")
        else:
            self.stdout.write(text, ending="")
