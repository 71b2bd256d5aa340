"""The commands README.md and docs/*.md tell a reader to run exist, with the options they pass:
`manage.py X --flag` and `cauterweb X --flag` in code spans and code blocks, a span that opens
with a command's name (`validate --until-settled`), and the README's command list, which names
every command of the project."""

import re
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
PROJECT_APPS = ("cauterweb", "lifecycle", "replay", "dashboard")
# A command at the start of a span or a line, after any `NAME=value ` and the interpreter.
INVOCATION = re.compile(
    r"^(?:[A-Z_]+=\S*\s+)*(?:\S*python\s+)?(?:\S*/)?(?:manage\.py|cauterweb)\s+([a-z_]+)(.*)$"
)
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def options_of(name: str) -> set[str]:
    command = load_command_class(get_commands()[name], name)
    parser = command.create_parser("manage.py", name)
    return {option for action in parser._actions for option in action.option_strings}


def code_of(doc: Path) -> list[str]:
    """Every code span, and every line of every fenced code block (a `\\` continues a line)."""
    text = doc.read_text()
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
    lines = [line.strip() for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))
    return spans + lines


def project_commands() -> set[str]:
    return {name for name, app in get_commands().items() if app in PROJECT_APPS}


def invocations(doc: Path) -> list[tuple[str, str]]:
    """(command, the rest of its line) for each command run, and each span opening with the name
    of one of the project's commands."""
    found, ours = [], project_commands()
    for code in code_of(doc):
        match = INVOCATION.match(code)
        if match:
            found.append((match.group(1), match.group(2).split("#")[0]))
        elif code.split()[:1] and code.split()[0] in ours:
            found.append((code.split()[0], code))
    return found


def test_the_docs_name_commands_the_finder_sees():
    assert sum(len(invocations(doc)) for doc in DOCS) > 30


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.name)
def test_every_command_the_doc_runs_exists_with_its_options(doc):
    commands = get_commands()
    wrong = []
    for name, rest in invocations(doc):
        if name not in commands:
            wrong.append(f"{name}: no such command")
            continue
        wrong += [f"{name} {flag}" for flag in FLAG.findall(rest) if flag not in options_of(name)]
    assert wrong == []


def command_list() -> str:
    return README.read_text().split("## Command line", 1)[1].split("\n## ", 1)[0]


def test_the_readme_command_list_names_every_command_with_its_real_options():
    section, ours = command_list(), project_commands()
    assert len(ours) > 20
    assert sorted(name for name in ours if f"`{name}" not in section) == []
    wrong = []
    for span in re.findall(r"`([^`]+)`", section):
        name = span.split()[0]
        if name in ours:
            wrong += [
                f"{name} {flag}" for flag in FLAG.findall(span) if flag not in options_of(name)
            ]
    assert wrong == []


def test_the_readme_opens_with_the_two_set_up_commands():
    first_block = re.search(r"^```sh\n(.*?)^```", README.read_text(), flags=re.M | re.S)
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["make demo", "make test"]


def test_every_make_target_the_docs_run_is_in_the_makefile():
    targets = set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(), flags=re.M))
    run = {
        match.group(1)
        for doc in DOCS
        for code in code_of(doc)
        if (match := re.match(r"make ([\w.-]+)", code))
    }
    assert run >= {"demo", "test"}
    assert sorted(run - targets) == []
