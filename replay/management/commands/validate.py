from contextlib import nullcontext

from django.core.management.base import CommandError

from lifecycle.management.base import JsonCommand
from replay.rounds import round_run, rules_summary, run_until_settled


class Command(JsonCommand):
    help = "Run one validation round, or rounds until standstill (semantics §9.4, §15)."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument(
            "--until-settled", action="store_true", help="run rounds until one changes nothing"
        )
        parser.add_argument(
            "--timeout", type=float, default=600.0, help="give up after S seconds (default 600)"
        )

    def handle(self, *args, **options):
        if options["timeout"] <= 0:
            raise CommandError("--timeout must be a positive number of seconds")
        with self._bar() as bar:
            on_progress = bar.on_progress if bar else None
            if options["until_settled"]:
                result = run_until_settled(timeout_s=options["timeout"], on_progress=on_progress)
            else:
                vround = round_run(kicked_by="cli", on_progress=on_progress)
        if options["until_settled"]:
            rounds, settled = result["rounds"], result["settled"]
            rules = result["rules"]
        else:
            if vround is None:
                raise CommandError("another validation round is running; try again shortly")
            rounds, settled, rules = 1, True, rules_summary()
        self.emit({"rounds": rounds, "rules": rules}, _human(rounds, rules))
        if not settled:
            raise CommandError(
                f"not settled after {options['timeout']:g} s ({rounds} round(s)): rules are "
                "still changing; run again or raise --timeout"
            )

    def _bar(self):
        """A progress bar on a terminal only: never in --json, a pipe or a log."""
        if self._json or not self.stdout.isatty():
            return nullcontext()
        return _Bar(self.stdout._out)


class _Bar:
    """Candidates written out of the round's queue, one bar per round."""

    def __init__(self, out):
        self.out, self.bar = out, None

    def __enter__(self):
        return self

    def on_progress(self, written: int, queued: int) -> None:
        from tqdm import tqdm

        if self.bar is None or written < self.bar.n:
            if self.bar is not None:
                self.bar.close()
            self.bar = tqdm(total=queued, unit="candidate", desc="validating", file=self.out)
        self.bar.update(written - self.bar.n)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()


def _human(rounds: int, rules: list[dict]) -> str:
    lines = [f"{rounds} round(s)"]
    for r in rules:
        state = r["state"] + (f" ({r['pending_reason']})" if r["pending_reason"] else "")
        via = f" by {r['validator']}" if r["validator"] else ""
        lines.append(
            f"  {r['id']}: {state}{via}, replay attempts {r['replay_attempts']}: {r['reason']}"
        )
    return "\n".join(lines)
