"""`tool:` and `action:` atoms from a tool call (semantics §19): the tool's name, and the
command or operation it ran (`git push origin main` → `action:git.push`)."""

import re
import shlex

# Agent tools that run whatever command they are given: the program decides the tool family.
SHELL_TOOLS = frozenset(
    {
        "bash",
        "sh",
        "zsh",
        "shell",
        "terminal",
        "run_command",
        "run_shell_command",
        "run_terminal_cmd",
        "execute_command",
        "exec",
        "execute",
        "command",
        "cmd",
        "powershell",
        "container.exec",
        "local_shell",
        "computer",
    }
)
# Programs that name a tool family (`tool:` atom) when run through a shell tool.
PROGRAM_TOOL = {
    "git": "git",
    "gh": "gh",
    "pip": "pip",
    "pip3": "pip",
    "pip-compile": "pip",
    "uv": "uv",
    "poetry": "poetry",
    "npm": "npm",
    "npx": "npm",
    "yarn": "yarn",
    "pnpm": "pnpm",
    "docker": "docker",
    "docker-compose": "docker",
    "podman": "docker",
    "kubectl": "kubectl",
    "helm": "helm",
    "pytest": "pytest",
    "tox": "tox",
    "curl": "http",
    "wget": "http",
    "http": "http",
    "psql": "sql",
    "mysql": "sql",
    "sqlite3": "sql",
    "terraform": "terraform",
    "cargo": "cargo",
    "go": "go",
    "make": "make",
    "mvn": "maven",
    "gradle": "gradle",
    "apt": "apt",
    "apt-get": "apt",
    "brew": "brew",
    "aws": "aws",
    "gcloud": "gcloud",
    "az": "az",
    "systemctl": "systemctl",
    "django-admin": "django",
}
# Command-line programs whose first non-option word is a subcommand.
SUBCOMMAND_PROGRAMS = frozenset(
    {
        "git",
        "gh",
        "pip",
        "uv",
        "poetry",
        "npm",
        "yarn",
        "pnpm",
        "docker",
        "podman",
        "kubectl",
        "helm",
        "terraform",
        "cargo",
        "go",
        "apt",
        "apt-get",
        "brew",
        "aws",
        "gcloud",
        "az",
        "systemctl",
        "vault",
        "make",
        "django-admin",
        "conda",
        "bundle",
        "rails",
        "dotnet",
        "mvn",
        "gradle",
    }
)
# Options that take a value, so the word after them is not the subcommand.
_VALUE_OPTIONS = frozenset(
    {
        "-C",
        "-c",
        "--git-dir",
        "--work-tree",
        "-n",
        "--namespace",
        "--context",
        "-f",
        "--file",
        "-p",
        "--project",
        "--region",
        "--profile",
    }
)
# Words that say nothing about what the agent did.
_SKIP = frozenset(
    {"cd", "echo", "printf", "export", "set", "true", ":", "source", ".", "pwd", "clear"}
)
# Wrappers in front of the real program.
_WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "exec", "command", "xargs", "nice"})
_NPM_ALIASES = {
    "i": "install",
    "add": "install",
    "ci": "install",
    "t": "test",
    "rm": "uninstall",
    "un": "uninstall",
}
# kubectl verbs that change a deployment: one family whatever resource they name.
_DEPLOY = {
    ("rollout",): "deploy.rollout",
    ("set", "image"): "deploy.set_image",
    ("scale",): "deploy.scale",
}
HTTP_METHOD = re.compile(r"^\s*(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)\s+(?:https?://|/)", re.I)
_SQL = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH)\b", re.I)
# Plain-language file operations ("edit src/x.py", "search 'foo' --files").
_FILE_VERB = re.compile(
    r"^\s*(edit|create|delete|remove|search|read|write|open|view|rename|move)\s+\S", re.I
)
_FILE_VERBS = {"remove": "delete", "open": "read", "view": "read", "move": "rename"}
# Structured tool names (`read_file`, `str_replace_editor`, `WebFetch`) → an operation.
_TOOL_VERB = re.compile(
    r"(read|write|edit|create|delete|search|list|replace|glob|grep|fetch)", re.I
)
# Coding agents' editing tools whose names say no verb.
_EDIT_TOOLS = frozenset({"apply_patch", "str_replace_editor", "str_replace_based_edit_tool"})
_HTTP_TOOLS = frozenset({"webfetch", "fetch", "http_request", "http", "requests", "fetch_url"})
_FILE_TOOL = re.compile(r"file|dir|editor|path")
_EDITOR_TOOLS = frozenset({"read", "write", "edit", "multiedit", "glob", "grep", "notebookedit"})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_SHELL_C = frozenset({"-c", "-lc", "-cl", "-ic"})
_SEGMENT = re.compile(r"\s*(?:&&|\|\||;|\|(?!\|)|\n)\s*")


def slug(value: str) -> str:
    """A tool or operation name as an atom value: lower case, words joined by `_`."""
    value = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", value.strip())
    return re.sub(r"[^a-z0-9.]+", "_", value.lower()).strip("_.") or "unknown"


_SHELLISH = re.compile(r"bash|shell|terminal|command|cmd|console|exec")


def is_shell_tool(tool: str) -> bool:
    """A tool that runs whatever command it is given (or no tool name at all)."""
    name = slug(tool) if tool else ""
    return not name or name in SHELL_TOOLS or bool(_SHELLISH.search(name))


def reads_as_command(text: str, action: str) -> bool:
    """Input given to a non-shell tool counts as a command when it names a known program or
    operation, or is a short lower-case verb phrase ("post #oncall")."""
    if "." in action or action in ("codegen", "sleep"):
        return True
    words = text.split()
    return 0 < len(words) <= 4 and bool(re.match(r"^[a-z][a-z0-9_-]*$", words[0]))


def split_commands(text: str) -> list[list[str]]:
    """The simple commands of a shell line (`cd x && git push` → two), each as argv."""
    script = _shell_script(text)
    if script is not None:
        return split_commands(script)
    out = []
    for segment in _SEGMENT.split(text.strip()):
        if not segment:
            continue
        try:
            argv = shlex.split(segment, comments=True)
        except ValueError:  # an unbalanced quote: the words are still telling
            argv = segment.split()
        while argv and (argv[0] in _WRAPPERS or re.match(r"^\w+=", argv[0])):
            argv = argv[1:]
        if argv and argv[0] == "timeout" and len(argv) > 2:
            argv = argv[2:]
        if argv and argv[0] not in _SKIP:
            out.append(argv)
    return out


def _shell_script(text: str) -> str | None:
    """The script of `bash -lc "cd x && git push"` (how Codex runs every command), or None."""
    words = text.split(None, 1)
    if not words or (not words[0].startswith(tuple(_SHELLS)) and "/" not in words[0]):
        return None
    try:
        argv = shlex.split(text)
    except ValueError:
        return None
    if len(argv) == 3 and argv[0].rsplit("/", 1)[-1] in _SHELLS and argv[1] in _SHELL_C:
        return argv[2]
    return None


def _subcommand(argv: list[str], start: int = 1) -> str:
    i = start
    while i < len(argv):
        word = argv[i]
        if word in _VALUE_OPTIONS:
            i += 2
            continue
        if word.startswith("-"):
            i += 1
            continue
        return word if re.match(r"^[a-z][a-z0-9_-]*$", word) else ""
    return ""


def _program(argv: list[str]) -> tuple[str, list[str]]:
    """The real program and its argv: `python -m pip install` is `pip install`, `python
    manage.py migrate` is `django-admin migrate`."""
    prog = argv[0].rsplit("/", 1)[-1]
    if re.match(r"^python(\d(\.\d+)?)?$", prog) and len(argv) > 1:
        if argv[1] == "-m" and len(argv) > 2:
            return argv[2], argv[2:]
        if argv[1].endswith("manage.py"):
            return "django-admin", ["django-admin", *argv[2:]]
    if prog == "uv" and len(argv) > 1 and argv[1] == "pip":
        return "pip", argv[1:]
    return prog, argv


def command_action(argv: list[str]) -> tuple[str, str] | None:
    """(action value, tool family) for one command, or None."""
    prog, argv = _program(argv)
    family = PROGRAM_TOOL.get(prog, "")
    if prog in ("pytest", "tox", "nox") or (
        prog in ("npm", "yarn", "pnpm") and _subcommand(argv) in ("test", "t")
    ):
        return "test.run", family or prog
    if prog == "pip-compile":
        return "pip.compile", "pip"
    if prog in ("curl", "wget", "http", "httpie"):
        return "http.request", "http"
    if prog == "docker-compose":
        return "docker.compose", "docker"
    if "generator" in prog or "codegen" in prog:
        return "codegen", family
    if prog == "kubectl":
        words = [w for w in argv[1:] if not w.startswith("-")]
        for key, action in _DEPLOY.items():
            if tuple(words[: len(key)]) == key:
                return action, "kubectl"
    if prog in SUBCOMMAND_PROGRAMS:
        sub = _subcommand(argv)
        if prog in ("docker", "podman") and sub in ("buildx", "container", "image", "compose"):
            nested = _subcommand(argv, argv.index(sub) + 1) if sub != "compose" else ""
            sub = "build" if sub == "buildx" else (nested or sub)
        if prog in ("npm", "yarn", "pnpm"):
            sub = _NPM_ALIASES.get(sub, sub)
        name = "django" if prog == "django-admin" else PROGRAM_TOOL.get(prog, prog)
        if name in ("apt",):
            name = "apt"
        return (f"{name}.{slug(sub)}" if sub else slug(name)), family or slug(prog)
    return slug(prog), family


def text_actions(text: str) -> list[tuple[str, str, str]]:
    """(action value, tool family, the words that produced it) for a command or request text."""
    if not text.strip():
        return []
    if HTTP_METHOD.match(text):
        return [("http.request", "http", HTTP_METHOD.match(text).group(0).strip())]
    if _SQL.match(text):
        return [("sql.query", "sql", _SQL.match(text).group(1))]
    verb = _FILE_VERB.match(text)
    if verb:
        word = verb.group(1).lower()
        return [(f"file.{_FILE_VERBS.get(word, word)}", "", verb.group(1))]
    out = []
    for argv in split_commands(text):
        found = command_action(argv)
        if found:
            out.append((found[0], found[1], " ".join(argv[:3])))
    return out


def tool_operation(tool: str) -> str | None:
    """An operation named by a structured tool (`read_file` → `file.read`, Claude Code's
    `Edit` → `file.edit`, `WebFetch` → `http.request`), or None for any other tool."""
    name = tool.lower()
    if name in _EDIT_TOOLS:
        return "file.edit"
    if name in _HTTP_TOOLS:
        return "http.request"
    if not (_FILE_TOOL.search(name) or name in _EDITOR_TOOLS):
        return None
    match = _TOOL_VERB.search(name)
    if not match:
        return None
    verb = match.group(1).lower()
    if verb in ("grep", "glob", "list"):
        return "file.search" if verb != "list" else "file.list"
    if verb == "replace":
        return "file.edit"
    return f"file.{verb}"
