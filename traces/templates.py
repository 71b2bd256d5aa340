"""Error texts no known pattern covers (semantics §19): a stable `error:tmpl_<hash>` atom from a
log template mined with drain3.

Determinism: the miner is trained only on the committed seed file (`error_templates.txt`), in
file order, so its state is the same in every process. A text that falls into a seeded cluster
gets that cluster's template; any other text gets its own masked template (what Drain makes
of a single message). The atom is a hash of the template text, so the same text gets the same
atom in every process, whatever else was imported with it. `mine()` shows what the miner learns
over a batch (the `error_templates` command lists it) without changing any atom.
"""

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from drain3 import TemplateMiner
from drain3.masking import MaskingInstruction
from drain3.template_miner_config import TemplateMinerConfig

SEED_FILE = Path(__file__).with_name("error_templates.txt")
MAX_LINE = 300
# Variables in error messages: masked before mining so two wordings that differ only in a path,
# a number or a quoted name share a template.
MASKS = (
    (r"https?://\S+", "URL"),
    (r"[\w.+-]+@[\w-]+\.[\w.-]+", "EMAIL"),
    (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "UUID"),
    (r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b", "IP"),
    (r"'[^'\n]{1,120}'|\"[^\"\n]{1,120}\"|`[^`\n]{1,120}`", "QUOTED"),
    (r"(?:[\w.-]*/)+[\w.-]+", "PATH"),
    (r"\b[\w-]+(?:\.[\w-]+){2,}\b", "DOTTED"),
    (r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b", "HEX"),
    # Names with digits in them (job-4242, node7, 19f3a) are instances, not the failure.
    (r"\b(?=[A-Za-z_-]*\d)(?=[\d_-]*[A-Za-z])[A-Za-z0-9_-]{4,}\b", "ID"),
    (r"\b\d+(?:\.\d+)?(?:ms|s|m|h|kb|mb|gb|b|%)?\b", "NUM"),
)
_INFORMATIVE = re.compile(
    r"error|fatal|exception|failed|failure|cannot|can't|unable|denied|invalid|missing|not\b|refus",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Template:
    template: str
    atom_value: str
    line: str


def _config() -> TemplateMinerConfig:
    config = TemplateMinerConfig()
    config.masking_instructions = [MaskingInstruction(p, name) for p, name in MASKS]
    config.drain_sim_th = 0.5
    config.drain_depth = 4
    config.parametrize_numeric_tokens = True
    return config


def _new_miner() -> TemplateMiner:
    miner = TemplateMiner(persistence_handler=None, config=_config())
    for line in SEED_FILE.read_text(encoding="utf-8").splitlines():
        if line.strip():
            miner.add_log_message(line.strip())
    return miner


@cache
def seeded_miner() -> TemplateMiner:
    return _new_miner()


def representative_line(text: str) -> str:
    """The line of an error text that says what went wrong: the first informative one."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    chosen = next((line for line in lines if _INFORMATIVE.search(line)), lines[0])
    return chosen[:MAX_LINE]


def atom_value(template: str) -> str:
    return "tmpl_" + hashlib.sha256(template.encode("utf-8")).hexdigest()[:10]


def template_for(text: str) -> Template | None:
    """The template of an error text, with its atom value; None for an empty text."""
    line = representative_line(text)
    if not line:
        return None
    miner = seeded_miner()
    tokens = miner.drain.get_content_as_tokens(miner.masker.mask(line))
    # The seeded cluster this text would join, and the template it would make of the two;
    # looked up without adding the text, so the miner's state never changes.
    cluster = miner.drain.tree_search(miner.drain.root_node, tokens, miner.drain.sim_th, True)
    if cluster is not None:
        merged = miner.drain.create_template(tokens, cluster.log_template_tokens)
        template = " ".join(merged)
    else:
        template = " ".join(tokens)
    return Template(template=template, atom_value=atom_value(template), line=line)


def seeded_templates() -> list[dict]:
    """The templates the shipped miner knows, with their atoms."""
    return [
        {
            "template": c.get_template(),
            "atom": "error:" + atom_value(c.get_template()),
            "size": c.size,
        }
        for c in seeded_miner().drain.clusters
    ]


def mine(texts: list[str]) -> list[dict]:
    """What drain3 learns over a batch of error texts (sorted, so the batch order does not
    matter): each cluster's template, how many texts fell in it, and the distinct atoms those
    texts were given. Inspection only: no atom changes."""
    miner = _new_miner()
    members: dict[int, list[str]] = {}
    for text in sorted(texts):
        line = representative_line(text)
        if not line:
            continue
        result = miner.add_log_message(line)
        found = template_for(text)
        members.setdefault(result["cluster_id"], []).append(found.atom_value if found else "")
    out = []
    for cluster in miner.drain.clusters:
        atoms = members.get(cluster.cluster_id)
        if atoms:
            out.append(
                {
                    "template": cluster.get_template(),
                    "texts": len(atoms),
                    "atoms": sorted({"error:" + a for a in atoms if a}),
                }
            )
    return sorted(out, key=lambda c: (-c["texts"], c["template"]))
