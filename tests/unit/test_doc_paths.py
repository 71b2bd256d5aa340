"""What README.md, docs/*.md and the packages' READMEs name in the repository exists: a
backticked path (`cauterweb/api/protocol.py`, `tests/unit/test_bench_*.py`), a dotted Python name
(`lifecycle.services.reports.reports_ingest`, `replay.backends.simulated:replay`) and a link to
another file. A module merged or moved otherwise leaves the docs sending a new engineer to a file
that is gone."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "comparison" / "README.md",
    *sorted((ROOT / "examples").glob("*/README.md")),
]
FILE_SUFFIXES = ("json", "jsonl", "md", "py", "toml", "txt", "yaml", "yml", "gz", "zip", "csv")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"[a-z_]+(?:\.[a-z_0-9]+)+(?::[a-z_0-9]+)?")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
PLACEHOLDER = re.compile(r"[<>{}…$=]")


def top_level_entries() -> set[str]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return {name.split("/")[0] for name in listed}


TOP = top_level_entries()
PACKAGES = {name for name in TOP if (ROOT / name / "__init__.py").exists()}


def words_in_code(doc: Path) -> list[str]:
    """Every word of every code span, without the punctuation of the sentence around it."""
    return [
        word.strip(".,;:()[]\"'")
        for span in CODE_SPAN.findall(doc.read_text())
        for word in span.split()
        if not PLACEHOLDER.search(word)
    ]


def path_exists(word: str) -> bool:
    path = word.split(":")[0]
    if "*" in path:
        return any(ROOT.glob(path))
    return (ROOT / path).exists()


def module_of(parts: list[str]) -> tuple[Path, list[str]] | None:
    """The longest leading parts that are a module, its file, and the names left after it."""
    for end in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:end])
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.exists():
                return candidate, parts[end:]
    return None


def defines(source: Path, name: str) -> bool:
    pattern = rf"^\s*(?:async def|def|class)\s+{name}\b|^{name}\s*[:=]"
    return re.search(pattern, source.read_text(), flags=re.M) is not None


def dotted_name_stale(word: str) -> str | None:
    """Why a dotted name does not resolve, or None. A name of two parts whose second is no module
    (`cauterweb.corpus`) is a trace attribute, not a reference to code."""
    module, _, attribute = word.partition(":")
    parts = module.split(".")
    found = module_of(parts)
    if found is None:
        return "no such module"
    source, rest = found
    if len(parts) == 2 and not attribute and rest:
        return None
    names = rest + ([attribute] if attribute else [])
    if len(names) > 1 or (names and not defines(source, names[0])):
        return f"{'.'.join(names)} is not defined in {source.relative_to(ROOT)}"
    return None


def stale_references(doc: Path) -> list[str]:
    stale = []
    for word in words_in_code(doc):
        first = word.split("/")[0]
        if "/" in word and first in TOP:
            if not path_exists(word):
                stale.append(f"{word}: no such path")
        elif (
            DOTTED.fullmatch(word)
            and word.split(".")[0] in PACKAGES
            and word.rsplit(".", 1)[1] not in FILE_SUFFIXES  # a file's name, not a module
        ):
            reason = dotted_name_stale(word)
            if reason:
                stale.append(f"{word}: {reason}")
    for target in LINK.findall(doc.read_text()):
        if not target.startswith(("http://", "https://")) and not (doc.parent / target).exists():
            stale.append(f"link to {target}: no such file")
    return stale


def test_the_docs_name_paths_and_modules_the_finder_sees():
    words = [word for doc in DOCS for word in words_in_code(doc)]
    assert sum("/" in word and word.split("/")[0] in TOP for word in words) > 100
    assert sum(bool(DOTTED.fullmatch(word)) for word in words) > 20


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.name)
def test_every_repository_path_and_module_the_doc_names_exists(doc):
    assert stale_references(doc) == []


@pytest.mark.parametrize(
    ("word", "stale"),
    [
        ("lifecycle/services/reports.py", False),
        ("lifecycle/services/enrolment.py", True),
        ("tests/unit/test_bench_*.py", False),
        ("lifecycle.services.reports.reports_ingest", False),
        ("replay.backends.simulated:replay", False),
        ("lifecycle.webhooks.signature_valid", True),
        ("lifecycle.outbox.no_such_function", True),
        ("cauterweb.corpus", False),
        ("traces.otlp.json", False),
    ],
)
def test_a_reference_to_a_moved_file_or_function_is_found(tmp_path, word, stale):
    doc = tmp_path / "doc.md"
    doc.write_text(f"See `{word}`.\n")
    assert bool(stale_references(doc)) is stale
