from lifecycle.management.base import JsonCommand
from lifecycle.models import Trajectory
from traces import templates


class Command(JsonCommand):
    help = (
        "The error templates the drain3 miner knows (the shipped seed), and with --corpus what "
        "it learns over the stored trajectories' failed steps whose error no rule names "
        "(semantics §19). Inspection only: no atom changes."
    )

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument(
            "--corpus", action="store_true", help="mine the stored trajectories' template errors"
        )

    def handle(self, *args, **options):
        document = {"seeded": templates.seeded_templates()}
        if options["corpus"]:
            document["corpus"] = templates.mine(_template_texts())
        lines = [f"{t['atom']}  {t['template']}" for t in document["seeded"]]
        if options["corpus"]:
            lines += ["", "learned over the corpus:"]
            lines += [
                f"{c['texts']:>5}  {c['template']}  ({', '.join(c['atoms'])})"
                for c in document["corpus"]
            ] or ["(no failed step fell through to the miner)"]
        self.emit(document, "\n".join(lines))


def _template_texts() -> list[str]:
    """The texts that earned a template atom, read back from each trajectory's explanation."""
    texts = []
    rows = Trajectory.objects.filter(meta__has_key="signature_derivation").values_list(
        "meta", "steps"
    )
    for meta, steps in rows.iterator():
        for because in meta["signature_derivation"].get("because", []):
            if because.get("rule") == "template.drain3":
                texts.append(_source_text(because["source"], steps) or because["match"])
    return texts


def _source_text(source: str, steps: list) -> str:
    """`steps[2].error` → that step's error text."""
    head, _, field = source.partition(".")
    if not head.startswith("steps["):
        return ""
    index = int(head[6:-1])
    step = steps[index] if 0 <= index < len(steps) and isinstance(steps[index], dict) else {}
    value = step.get(field)
    return value if isinstance(value, str) else ""
