"""Signature derivation (semantics §19, §11): `tool:`, `action:`, `error:`, `exception:` and
`exit:` atoms from a trajectory's steps, deterministic and explainable.

Every atom comes with the rule that produced it, the field it was read from and the words that
matched, so the trajectory page can show why a trajectory carries it. Error atoms are read only
from steps that failed (an error, an error status, a non-zero exit code, or output that says so
unmistakably): the words "fast-forward" in a clean `git pull` never make an error.

The trajectory's signature is the failure mode of the session:
- a failure or near miss: the atoms of its first failed step (where it went wrong); with no
  failed step, the last step's tool and action and the error class of the outcome text;
- a success: every tool and action it used, and no error atom.
"""

import json
import re
import shlex
from dataclasses import dataclass

from . import commands, errors, templates

DERIVATION_VERSION = 1
_COMMAND_KEYS = ("command", "cmd", "script", "shell_command", "commands", "argv")


@dataclass(frozen=True)
class Because:
    """One atom and the text that produced it."""

    atom: str
    rule: str
    source: str
    match: str

    def as_dict(self) -> dict:
        return {"atom": self.atom, "rule": self.rule, "source": self.source, "match": self.match}


@dataclass(frozen=True)
class StepAtoms:
    atoms: list[str]
    reasons: list[Because]
    failed: bool


def as_text(value: object) -> str:
    if value is None or value is False:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and ("message" in value or "type" in value):
        return ": ".join(str(value[k]) for k in ("type", "message") if value.get(k))
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _normalise(text: str) -> str:
    """git and servers prefix continuation lines (`hint: `, `remote: `); a sentence split over
    such lines must still match as one."""
    return re.sub(r"\n\s*(?:hint|remote):\s*", " ", text)


def _arguments(step: dict) -> object:
    for key in ("arguments", "args", "input", "parameters"):
        value = step.get(key)
        if isinstance(value, str):
            stripped = value.strip()
            if stripped[:1] in "{[":
                try:
                    return json.loads(stripped)
                except ValueError:
                    return value
        if value is not None:
            return value
    return None


def command_text(step: dict) -> str:
    """The command or request a step ran, as text."""
    args = _arguments(step)
    if isinstance(args, dict):
        # Frameworks wrap the call: smolagents as {args, kwargs}, OpenLLMetry as {inputs, …}.
        for wrapper in ("kwargs", "inputs"):
            if isinstance(args.get(wrapper), dict):
                args = {**args, **args[wrapper]}
    if isinstance(args, dict):
        for key in _COMMAND_KEYS:
            value = args.get(key)
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return shlex.join(value)
            if isinstance(value, str) and value.strip():
                return value
        method, url = args.get("method"), args.get("url") or args.get("uri")
        if isinstance(url, str) and url:
            return f"{str(method or 'GET').upper()} {url}"
        return ""
    if isinstance(args, list) and all(isinstance(v, str) for v in args):
        return shlex.join(args)
    return args if isinstance(args, str) else ""


def tool_name(step: dict) -> str:
    for key in ("tool", "name", "tool_name", "function"):
        value = step.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _exit_code(step: dict, texts: list[tuple[str, str]]) -> tuple[int | None, Because | None]:
    for key in ("exit_code", "returncode", "exitCode"):
        value = step.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value, Because(f"exit:{value}", "exit_code.field", key, str(value))
    for source, text in texts:
        match = errors.EXIT_CODE.search(text)
        if match:
            code = int(match.group(1))
            return code, Because(f"exit:{code}", "exit_code.text", source, match.group(0))
    return None, None


def step_failed(step: dict, texts: list[tuple[str, str]], exit_code: int | None) -> bool:
    status = str(step.get("status") or "").lower()
    if status in ("error", "failed", "failure", "status_code_error", "2"):
        return True
    if as_text(step.get("error")).strip() or step.get("is_error") is True:
        return True
    if exit_code not in (None, 0):
        return True
    return any(
        errors.FAILURE_MARKERS.search(text)
        for _, text in texts
        if text and "failure_markers" in errors.candidates(text)
    )


def _first(pattern: re.Pattern, texts: list[tuple[str, str]]) -> tuple[str, re.Match] | None:
    for source, text in texts:
        match = pattern.search(text)
        if match:
            return source, match
    return None


def error_atoms(texts: list[tuple[str, str]]) -> tuple[list[str], list[Because]]:
    """The normalised error classes of some failure texts, each with its reason."""
    texts = [(source, _normalise(text)) for source, text in texts if text and text.strip()]
    # One pass finds the rules that may match; only those are searched (errors.candidates).
    may = errors.candidates("\n".join(text for _, text in texts))
    reasons = _rule_reasons(errors.RULES, texts, may) + _http_status_reasons(texts, may)
    if not any(r.atom.startswith("error:http_") for r in reasons):
        reasons += _rule_reasons(errors.HTTP_PHRASE_ONLY, texts, may)
    reasons += _errno_reasons(texts) if "errno" in may else []
    reasons += _exception_reasons(texts) if "exception" in may else []
    classes = {r.atom for r in reasons}
    if "error:module_not_found" in classes:
        # "ImportError: No module named x" is the module failure, not a broken import.
        reasons = [r for r in reasons if r.atom != "error:import_error"]
    if "error:test_failed" in classes and len(classes - {"error:test_failed"}) > 0:
        # A test run's summary says only that tests failed; a text that also says why (a
        # timeout, a missing module) has that failure mode.
        reasons = [r for r in reasons if r.atom != "error:test_failed"]
    atoms = list(dict.fromkeys(r.atom for r in reasons))
    return atoms, reasons


def _rule_reasons(rules, texts: list[tuple[str, str]], may: set[str]) -> list[Because]:
    """The first match of each rule that may match, with its class."""
    reasons = []
    for rule in rules:
        hit = _first(rule.pattern, texts) if rule.name in may else None
        if hit:
            reasons.append(Because(f"error:{rule.error_class}", rule.name, hit[0], hit[1].group(0)))
    return reasons


def _http_status_reasons(texts: list[tuple[str, str]], may: set[str]) -> list[Because]:
    return [
        Because(f"error:http_{match.group(1)}", rule.name, source, match.group(0))
        for rule in errors.HTTP_STATUS
        if rule.name in may
        for source, text in texts
        for match in rule.pattern.finditer(text)
    ]


def _errno_reasons(texts: list[tuple[str, str]]) -> list[Because]:
    return [
        Because(f"error:{errors.ERRNO[number]}", "errno.number", source, match.group(0))
        for source, text in texts
        for match in errors.ERRNO_PATTERN.finditer(text)
        if (number := int(match.group(1))) in errors.ERRNO and errors.ERRNO[number]
    ]


def _exception_reasons(texts: list[tuple[str, str]]) -> list[Because]:
    out = []
    for source, text in texts:
        for match in errors.EXCEPTION.finditer(text):
            name = match.group(1)
            if name in errors.GENERIC_EXCEPTIONS:
                continue
            # A class a rule already names (FileNotFoundError → file_not_found) gives only
            # that rule's class.
            if any(rule.pattern.search(name) for rule in errors.RULES):
                continue
            out.append(Because(f"exception:{name}", "exception.class", source, match.group(0)))
    return out


def _tool_and_actions(step: dict, where: str) -> list[Because]:
    out = []
    tool = tool_name(step)
    if tool:
        out.append(Because(f"tool:{commands.slug(tool)}", "tool.name", f"{where}.tool", tool))
    text = command_text(step)
    found = commands.text_actions(text) if text else []
    shell = commands.is_shell_tool(tool)
    if not shell:
        # A tool that is not a shell gets an action from its input only when the input reads
        # as a command, not as prose handed to it.
        found = [f for f in found if commands.reads_as_command(text, f[0])]
    for action, family, words in found:
        if family and family != commands.slug(tool):
            # `run_git` or `bash` running `git push`: the program's family is a tool too.
            out.append(Because(f"tool:{family}", "tool.program", f"{where}.input", words))
        if not family and not shell and "." not in action and action != commands.slug(tool):
            # A tool's own verb ("post" to the slack tool) is that tool's operation.
            action = f"{commands.slug(tool)}.{action}"
        out.append(Because(f"action:{action}", "action.command", f"{where}.input", words))
    if not found and tool:
        operation = commands.tool_operation(tool)
        if operation:
            out.append(Because(f"action:{operation}", "action.tool", f"{where}.tool", tool))
    return out


def derive_step(step: dict, *, where: str = "step") -> StepAtoms:
    """The atoms of one tool call, with the reasons, and whether the call failed."""
    if not isinstance(step, dict):
        return StepAtoms([], [], False)
    reasons = _tool_and_actions(step, where)
    texts = [
        (f"{where}.error", as_text(step.get("error"))),
        (f"{where}.output", as_text(step.get("output", step.get("result")))),
    ]
    code, exit_reason = _exit_code(step, texts)
    failed = step_failed(step, texts, code)
    if failed:
        atoms, error_reasons = error_atoms(texts)
        if not atoms:
            error_reasons = _template_reasons(texts)
        reasons += error_reasons
        if exit_reason and code != 0:
            reasons.append(exit_reason)
    atoms = list(dict.fromkeys(r.atom for r in reasons))
    return StepAtoms(atoms, reasons, failed)


def _template_reasons(texts: list[tuple[str, str]]) -> list[Because]:
    """A failure no rule knows: the drain3 template of its most telling text. A bare label
    (`tool_error`, `ERROR`: an `error.type` or a level) says only that it failed, and would
    give every unknown failure one atom, so a text with words comes first."""
    worded = [(source, text) for source, text in texts if len(text.split()) > 1]
    for source, text in worded or texts:
        found = templates.template_for(text)
        if found:
            return [Because(f"error:{found.atom_value}", "template.drain3", source, found.template)]
    return []


def _outcome_text(outcome: object) -> str:
    if isinstance(outcome, dict):
        return "\n".join(
            as_text(outcome.get(k)) for k in ("summary", "message", "error", "status_message")
        )
    return as_text(outcome)


def derive_signature(trajectory: dict) -> tuple[list[str], list[Because], list[StepAtoms]]:
    """(signature, the reasons for its atoms, the atoms of every step)."""
    steps = trajectory.get("steps") if isinstance(trajectory.get("steps"), list) else []
    derived = [derive_step(step, where=f"steps[{i}]") for i, step in enumerate(steps)]
    kind = trajectory.get("kind")
    if kind in ("failure", "near_miss"):
        failed = next((s for s in derived if s.failed), None)
        if failed is not None:
            return failed.atoms, failed.reasons, derived
        reasons = [r for r in (derived[-1].reasons if derived else []) if not _is_error(r.atom)]
        text = _outcome_text(trajectory.get("outcome"))
        if kind == "failure" and text.strip():
            atoms, error_reasons = error_atoms([("outcome", text)])
            reasons += error_reasons or _template_reasons([("outcome", text)])
        return list(dict.fromkeys(r.atom for r in reasons)), reasons, derived
    reasons = [r for s in derived for r in s.reasons if not _is_error(r.atom)]
    return list(dict.fromkeys(r.atom for r in reasons)), reasons, derived


def _is_error(atom: str) -> bool:
    return atom.partition(":")[0] in ("error", "exception", "exit")


def with_derived_signature(trajectory: dict) -> dict:
    """A copy of a trajectory whose signature is derived (when it has none) and whose steps
    carry their atoms, with the explanation kept in `meta["signature_derivation"]`."""
    if trajectory.get("signature"):
        return trajectory
    signature, reasons, derived = derive_signature(trajectory)
    out = dict(trajectory)
    out["signature"] = signature
    if isinstance(trajectory.get("steps"), list):
        out["steps"] = [
            {**step, "atoms": s.atoms} if isinstance(step, dict) and "atoms" not in step else step
            for step, s in zip(trajectory["steps"], derived, strict=True)
        ]
    meta = trajectory.get("meta")
    if meta is not None and not isinstance(meta, dict):
        return out  # the corpus import names the bad field; nothing to explain into
    meta = dict(meta or {})
    meta["signature_derivation"] = {
        "version": DERIVATION_VERSION,
        "signature": signature,
        "because": [r.as_dict() for r in reasons],
    }
    out["meta"] = meta
    return out
