from django.core.management.base import CommandError

from lifecycle.extractors import (
    FamilyNotFound,
    LlmAnswerError,
    LlmNotConfigured,
    extract_candidates,
    extract_from_family,
)
from lifecycle.management.base import JsonCommand


class Command(JsonCommand):
    help = (
        "Propose candidates from the corpus: the contrastive extractor (offline), and with --llm "
        "also the configured chat-completions model. Recorded as candidates by the extractor."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--llm", action="store_true", help="also ask the configured LLM")
        parser.add_argument("--case", action="append", help="only these failure ids (repeat)")
        parser.add_argument(
            "--family",
            help="instead, the recovery extractor on one failure family: its atoms, as the "
            "corpus page lists them (e.g. 'action:git.push error:non_fast_forward')",
        )

    def handle(self, *args, **options):
        try:
            if options["family"]:
                run = extract_from_family(atoms=options["family"].split())
            else:
                run = extract_candidates(llm=options["llm"], case_ids=options["case"])
        except (LlmNotConfigured, LlmAnswerError, FamilyNotFound) as exc:
            raise CommandError(f"{exc}; nothing recorded") from None
        human = [
            f"[{p.extractor}] {p.source_case} ({p.scope}): {p.trigger} → {p.directive}"
            for p in run.proposals
        ]
        human += [f"skipped {s.case}: {s.why}" for s in run.skipped]
        human.append(f"{len(run.created)} created, {len(run.unchanged)} unchanged")
        self.emit(run.as_dict(), "\n".join(human))
