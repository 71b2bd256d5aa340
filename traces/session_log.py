"""One coding-agent session as it is read from its log (docs/traces.md, "Coding-agent logs"):
the tool calls a reader finds, each paired with its result, made into one trajectory.

Every log reader (Claude Code, Codex CLI, OpenHands, SWE-agent) feeds a `SessionLog` the same
four things — the task, a tool call, a tool result, the end — so the rules below hold for all:

- **Secrets** are redacted from every text as it arrives (`redact`), before anything is
  derived from it or kept.
- **Atoms** are derived per step as its result arrives (semantics §19: `traces.derive`), on the
  whole text; only then is the text cut to a bounded excerpt, so a session of any length costs
  a bounded amount of memory per step and a bounded number of steps.
- **Recovery**: a failed step is *recovered* when a later step runs its action (its last
  command, the one whose exit status the shell reports) and succeeds; the successful steps in
  between are the fix (none: it was retried as it was). That pairing is what an extractor
  learns a rule from (`meta["recoveries"]`).
- **Kind**: `failure` when the agent's own end says so (an error status, limits exceeded) or a
  failed step was never recovered — its last try failed — except a look-around (`ls`, `cat`,
  a read, a search) that failed and was left behind; `near_miss` when every failed step was recovered; `success` when
  no step failed.
- **Signature**: a failure carries the atoms of the step it never got past (the first
  unrecovered one), a near miss those of its first failed step, a success every tool and
  action it used — the same rule as `derive.derive_signature`, told which step decides.
"""

from dataclasses import dataclass, field
from pathlib import PurePosixPath

from . import commands, limits_log, model
from .derive import DERIVATION_VERSION, Because, StepAtoms, derive_step, error_atoms
from .redact import redact, redact_value

# Actions whose failure only means the agent looked and did not find: left behind, they do not
# make the session a failure (they still make it a near miss, and they still form a family).
LOOK_AROUND = frozenset(
    {
        "ls",
        "cat",
        "head",
        "tail",
        "find",
        "grep",
        "rg",
        "which",
        "type",
        "stat",
        "file",
        "tree",
        "wc",
        "file.read",
        "file.search",
        "file.list",
        "git.status",
        "git.log",
        "git.show",
        "git.diff",
        "git.branch",
    }
)
# Programs whose exit status 1 means "no match", "false" or "they differ", not a failure.
_EXIT_ONE_IS_AN_ANSWER = frozenset(
    {"grep", "egrep", "fgrep", "rg", "ag", "diff", "cmp", "test", "["}
)


@dataclass
class _Step:
    data: dict
    atoms: StepAtoms | None = None


@dataclass
class SessionLog:
    """The session a reader is reading. `source` names the file and line range it came from."""

    fmt: str
    id: str
    session_id: str
    source: dict
    task: str = ""
    started_at: str | None = None
    end_failed: bool | None = None
    end_message: str = ""
    extra: dict = field(default_factory=dict)
    _steps: list[_Step] = field(default_factory=list)
    _pending: dict[str, int] = field(default_factory=dict)
    _omitted: int = 0

    def set_task(self, text: str) -> None:
        if not self.task and text and text.strip():
            self.task = redact(text.strip())[: limits_log.TASK_CHARS]

    def call(self, call_id: str, tool: str, arguments: object, *, at: str | None = None) -> None:
        """A tool call; its result follows with the same `call_id`."""
        if len(self._steps) >= limits_log.MAX_STEPS:
            self._omitted += 1
            return
        arguments = limits_log.clip_value(redact_value(model.maybe_json(arguments)))
        data = model.step(tool=tool or "tool", arguments=arguments, call_id=call_id)
        if at:
            data["started_at"] = at
        self._steps.append(_Step(data))
        if call_id:
            self._pending[call_id] = len(self._steps) - 1

    def result(
        self,
        call_id: str,
        *,
        output: str = "",
        error: str = "",
        failed: bool | None = None,
        exit_code: int | None = None,
    ) -> None:
        """The result of the call `call_id`. `failed` is what the log says (an error flag, an
        exit status); None when it says nothing, and then the output decides (semantics §19:
        `fatal:`, a traceback…). A result for no known call is ignored: its call was cut by
        the step limit, or lies before the part of the log that was kept."""
        index = self._pending.pop(call_id, None)
        if index is None:
            return
        step = self._steps[index]
        data = step.data
        data["output"], data["error"] = redact(output or ""), redact(error or "")
        if exit_code is not None:
            data["exit_code"] = exit_code
        if failed and _is_an_answer(data, exit_code):
            failed = False
        if failed:
            data["status"] = "error"
            if not data["error"]:
                # What a failed call printed is its error (kept once, not twice).
                data["error"], data["output"] = data["output"] or f"exit code {exit_code}", ""
        elif failed is False:
            # The log says it succeeded: words in its output ("error:" in a file it printed)
            # must not make it a failure.
            data["error"] = ""
        judged = data if failed is not False else {**data, "output": "", "exit_code": 0}
        step.atoms = derive_step(judged, where=f"steps[{index}]")
        data["status"] = "error" if step.atoms.failed else "ok"
        data["output"] = limits_log.clip(data["output"])
        data["error"] = limits_log.clip(data["error"])
        data["atoms"] = step.atoms.atoms

    def end(self, *, failed: bool | None, message: str = "") -> None:
        """How the agent said the session ended (None: it did not say)."""
        if failed is not None:
            self.end_failed = failed
        if message:
            self.end_message = redact(message)[: limits_log.TEXT_CHARS]

    def trajectory(self) -> dict:
        """The session as a corpus line (semantics §2) with its signature derived."""
        for index in list(self._pending.values()):
            step = self._steps[index]
            step.data["status"] = "no_result"
            step.atoms = derive_step(
                {**step.data, "output": "", "error": ""}, where=f"steps[{index}]"
            )
            step.data["atoms"] = step.atoms.atoms
        self._pending.clear()
        steps = [s.data for s in self._steps]
        derived = [s.atoms or StepAtoms([], [], False) for s in self._steps]
        found = recoveries(steps, derived)
        unrecovered = [i for i, d in enumerate(derived) if d.failed and i not in found]
        decisive = [
            i for i in unrecovered if not _looked_around(derived[i]) and _last_try(i, derived)
        ]
        kind, deciding = _kind(self.end_failed, derived, decisive)
        signature, reasons = _signature(kind, deciding, derived, self.end_message)
        return self._build(kind, steps, signature, reasons, found, unrecovered)

    def _build(self, kind, steps, signature, reasons, found, unrecovered) -> dict:
        meta = {
            "source_format": self.fmt,
            "source": self.source,
            **self.extra,
            "signature_derivation": {
                "version": DERIVATION_VERSION,
                "signature": signature,
                "because": [r.as_dict() for r in reasons],
            },
        }
        if found:
            meta["recoveries"] = [found[i] for i in sorted(found)][: limits_log.MAX_RECOVERIES]
        if unrecovered:
            meta["unrecovered_steps"] = unrecovered[: limits_log.MAX_RECOVERIES]
        if self._omitted:
            meta["steps_omitted"] = self._omitted
        trajectory = {
            "id": self.id,
            "kind": kind,
            "task": self.task or f"{self.fmt} session {self.session_id}",
            "steps": steps,
            "outcome": model.outcome(kind, self.end_message),
            "metrics": {},
            "signature": signature,
            "session_id": self.session_id[: model.ID_LIMIT],
            "started_at": self.started_at,
            "replayable": False,
            "meta": meta,
        }
        return limits_log.fit_meta(trajectory)


def file_name(name: str) -> str:
    """The name a trajectory keeps of its file: the last part of its path, whether it was read
    from a directory, an archive or an upload, so the same log imports to the same content
    wherever it was read from (the import is idempotent)."""
    return PurePosixPath(name.replace(":", "/").replace("\\", "/")).name


def _is_an_answer(step: dict, exit_code: int | None) -> bool:
    """`grep` finding nothing exits 1 and prints nothing: an answer, not a failure."""
    if exit_code != 1 or step["error"].strip() not in ("", "Exit code 1"):
        return False
    argvs = commands.split_commands(step["input"] or "")
    return bool(argvs) and argvs[-1][0].rsplit("/", 1)[-1] in _EXIT_ONE_IS_AN_ANSWER


def _key(atoms: StepAtoms) -> str:
    """What a retry must run again: the step's last action, else its first tool."""
    actions = [a for a in atoms.atoms if a.startswith("action:")]
    if actions:
        return actions[-1]
    return next((a for a in atoms.atoms if a.startswith("tool:")), "")


def _looked_around(atoms: StepAtoms) -> bool:
    key = _key(atoms)
    return key.startswith("action:") and key.partition(":")[2] in LOOK_AROUND


def _last_try(index: int, derived: list[StepAtoms]) -> bool:
    """Whether no later step ran the failed step's action again: a failure tried again and
    failing otherwise is decided by the later try (the one the session never got past)."""
    key = _key(derived[index])
    return not any(key in d.atoms for d in derived[index + 1 :])


def recoveries(steps: list[dict], derived: list[StepAtoms]) -> dict[int, dict]:
    """Failed step index → how it was recovered: the later step that ran its action and
    succeeded (`retry_step`), the successful steps between (`fix_steps`, their actions in
    `fix_actions`), and `how` ("fixed" or "retried" when nothing was done between)."""
    found = {}
    for i, atoms in enumerate(derived):
        key = _key(atoms)
        if not atoms.failed or not key:
            continue
        for j in range(i + 1, len(derived)):
            if derived[j].failed or key not in derived[j].atoms:
                continue
            between = [k for k in range(i + 1, j) if not derived[k].failed]
            actions = [a for k in between for a in derived[k].atoms if a.startswith("action:")]
            found[i] = {
                "step": i,
                "atoms": _failure_atoms(atoms),
                "retry_step": j,
                "fix_steps": between,
                "fix_actions": list(dict.fromkeys(actions)),
                "fix_commands": [steps[k]["input"][:200] for k in between][:10],
                "how": "fixed" if between else "retried",
            }
            break
    return found


def _failure_atoms(atoms: StepAtoms) -> list[str]:
    return [
        a for a in atoms.atoms if a.partition(":")[0] in ("tool", "action", "error", "exception")
    ]


def _kind(end_failed: bool | None, derived: list[StepAtoms], decisive: list[int]):
    """(kind, the index of the step that decides the signature, or None)."""
    failed = [i for i, d in enumerate(derived) if d.failed]
    if decisive:
        return "failure", decisive[0]
    if end_failed:
        return "failure", (failed[-1] if failed else None)
    if failed:
        return "near_miss", failed[0]
    return "success", None


def _signature(kind: str, deciding: int | None, derived: list[StepAtoms], message: str):
    if kind == "success" or (deciding is None and kind != "failure"):
        reasons = _first_per_atom(r for d in derived for r in d.reasons if not _is_error(r.atom))
        return [r.atom for r in reasons][: limits_log.SIGNATURE_ATOMS], reasons[
            : limits_log.SIGNATURE_ATOMS
        ]
    if deciding is not None:
        reasons = _first_per_atom(derived[deciding].reasons)
    else:
        last = derived[-1].reasons if derived else []
        reasons = [r for r in last if not _is_error(r.atom)]
        if message.strip():
            reasons += error_atoms([("outcome", message)])[1]
        reasons = _first_per_atom(reasons)
    reasons = reasons[: limits_log.SIGNATURE_ATOMS]
    return [r.atom for r in reasons], reasons


def _first_per_atom(reasons) -> list[Because]:
    seen, out = set(), []
    for reason in reasons:
        if reason.atom not in seen:
            seen.add(reason.atom)
            out.append(reason)
    return out


def _is_error(atom: str) -> bool:
    return atom.partition(":")[0] in ("error", "exception", "exit")
