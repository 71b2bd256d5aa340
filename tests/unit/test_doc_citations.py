"""Code, tests and docs cite the semantics by anchor (`docs/semantics.md#s21`, `[…](deploy.md#faults)`):
every such citation must land on an anchor that exists, or a renamed heading silently strands
the comments that explain why the code does what it does."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"(docs/[\w.-]+\.md)#([\w.-]+)")
MARKDOWN_LINK = re.compile(r"\]\(([\w./-]+\.md)#([\w.-]+)\)")
TEXT_SUFFIXES = (".py", ".md", ".html", ".toml", ".cfg", ".txt")


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / name for name in listed if name.endswith(TEXT_SUFFIXES)]


def heading_slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors_of(doc: Path) -> set[str]:
    text = doc.read_text()
    explicit = set(re.findall(r'<a id="([^"]+)"', text))
    headings = {heading_slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}
    return explicit | headings


def citations() -> list[tuple[str, Path, str]]:
    """(where, the cited document, the anchor) for every citation in a tracked file."""
    found = []
    for path in tracked_text_files():
        if not path.exists():
            continue
        text = path.read_text(errors="replace")
        where = str(path.relative_to(ROOT))
        found += [(where, ROOT / doc, anchor) for doc, anchor in CITATION.findall(text)]
        if path.suffix == ".md":
            found += [
                (where, (path.parent / doc).resolve(), anchor)
                for doc, anchor in MARKDOWN_LINK.findall(text)
            ]
    return found


def test_the_repository_cites_its_docs_by_anchor():
    assert len(citations()) > 50  # the finder finds them: an empty list would pass below


def test_every_cited_anchor_exists():
    cache: dict[Path, set[str]] = {}
    stranded = []
    for where, doc, anchor in citations():
        if not doc.exists():
            stranded.append(f"{where}: {doc.name} does not exist")
            continue
        if doc not in cache:
            cache[doc] = anchors_of(doc)
        if anchor not in cache[doc]:
            stranded.append(f"{where}: {doc.name}#{anchor}")
    assert stranded == []


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("One report, one transaction", "one-report-one-transaction"),
        (
            "A small transformer, measured and not taken",
            "a-small-transformer-measured-and-not-taken",
        ),
        ("Faults: what a dead worker costs", "faults-what-a-dead-worker-costs"),
    ],
)
def test_heading_slugs_follow_githubs_rule(heading, slug):
    assert heading_slug(heading) == slug
