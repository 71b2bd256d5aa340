"""Offline extractors: the product proposes candidates by itself.

- **Contrastive** (always available): for each family of failures (the same failure-mode
  atoms), compare the failure with the successful sessions that ran the same action. The
  trigger comes from the failure's own atoms ("when git push fails with non-fast-forward");
  the directive from the action most of those successes took and the failure never did (a
  `git pull` before the push), phrased from a small table of known actions, with the command
  the successes ran. Nothing is proposed when no action has the support of at least half the
  successes: a guess is not a rule.
- **Recovery** (from a failure family of coding-agent logs, docs/traces.md): the sessions of
  one family (the same action failing the same way) that got past it recorded what they did
  between the failure and the retry that worked (`meta["recoveries"]`). The step most of them
  took becomes the directive ("pull the latest changes before pushing: git pull --rebase"); a
  family whose sessions mostly retried as they were gets "retry it once as it is". Nothing is
  proposed without the support of half the recoveries, or with no recovery at all.
- **LLM** (optional): an OpenAI-compatible chat-completions endpoint
  (`CAUTERWEB_LLM_BASE_URL`, `CAUTERWEB_LLM_MODEL`, `CAUTERWEB_LLM_API_KEY`), never called
  unless configured. The model writes the prose only; scope, metric and signature come from
  the failure's data. An answer that is not a JSON object with a trigger and a directive is
  an error, and then nothing at all is recorded.

Proposals are recorded as candidates by the extractor (author kind `extractor`): they are
evaluated like any other candidate and promote only on evidence (semantics §3).
"""

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from django.conf import settings
from django.db import transaction
from django.db.models import F

from lifecycle import signals
from lifecycle.services.rules import rule_record_candidate

from . import atoms as atom_lib
from .follow_ups import compared_in_one_task
from .metrics import load_registry
from .models import Trajectory, TrajectoryAtom, TrajectoryKind
from .states import Actor

# How a directive names the step the successes took. Unknown actions fall back to the command.
ACTION_PHRASES = {
    "git.pull": "pull the latest changes",
    "git.fetch": "fetch the remote changes",
    "git.rebase": "rebase onto the remote branch",
    "git.stash": "stash local changes",
    "test.rerun": "re-run the failing test on its own",
    "ci.quarantine": "quarantine the flaky test",
    "pip.compile": "regenerate the lock file",
    "file.search": "search the repository for the file's real path",
    "django.makemigrations": "create a merge migration",
    "docker.ps": "find the container holding the port",
    "docker.stop": "stop the container holding the port",
    "sleep": "wait for the Retry-After interval",
    "pip.install": "install the missing package",
    "npm.install": "install the dependencies",
    "file.read": "read the file first",
}
# Steps that only look around: a recovery's fix is what it did, not what it looked at.
LOOKING = frozenset(
    {
        "ls",
        "cat",
        "head",
        "tail",
        "pwd",
        "echo",
        "find",
        "grep",
        "rg",
        "git.status",
        "git.log",
        "git.diff",
        "git.show",
        "git.branch",
    }
)
RETRIED = "retry"
FAMILY_SESSIONS = 500
# How a trigger names an error class; others read as words ("file_not_found" → "file not found").
ERROR_PHRASES = {"non_fast_forward": "non-fast-forward", "http_429": "HTTP 429"}
MIN_SUPPORT = 0.5


@dataclass
class Proposal:
    trigger: str
    directive: str
    scope: str
    metric: str
    signature: list[str]
    source_case: str
    extractor: str
    provenance: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Skipped:
    case: str
    why: str


def _key(atom: str) -> str:
    return atom_lib.atom_key(atom)


def _value(atom: str) -> str:
    return atom_lib.atom_value(atom)


def _step_actions(steps: list[dict]) -> list[tuple[str, str]]:
    """(action, command) of each step that names an action, in order."""
    out = []
    for step in steps or []:
        for atom in step.get("atoms") or []:
            if _key(atom) == "action":
                out.append((_value(atom), str(step.get("input") or "")))
    return out


def fault_atoms(trajectory: dict) -> list[str]:
    """The atoms of the failing step: the first step with an error and an `error:` atom; else
    the trajectory's failure-mode atoms."""
    for step in trajectory.get("steps") or []:
        step_atoms = step.get("atoms") or []
        if step.get("error") and any(_key(a) == "error" for a in step_atoms):
            return list(step_atoms)
    return sorted(atom_lib.failure_mode_atoms(trajectory.get("signature") or []))


def _words(text: str) -> str:
    return text.replace("_", " ").replace(".", " ")


def _gerund(verb: str) -> str:
    if verb.endswith("e") and not verb.endswith("ee"):
        return verb[:-1] + "ing"
    if (
        len(verb) == 3
        and verb[1] in "aeiou"
        and verb[2] not in "aeiouwxy"
        and verb[0] not in "aeiou"
    ):
        return verb + verb[-1] + "ing"
    return verb + "ing"


def trigger_text(atoms: Iterable[str]) -> str:
    """ "when git push fails with non-fast-forward" from tool:git, action:git.push,
    error:non_fast_forward."""
    atoms = list(atoms)
    tool = next((_value(a) for a in atoms if _key(a) == "tool"), "")
    action = next((_value(a) for a in atoms if _key(a) == "action"), "")
    errors = [
        ERROR_PHRASES.get(_value(a), _value(a).replace("_", " "))
        for a in atoms
        if _key(a) == "error"
    ]
    if action.startswith(f"{tool}."):
        subject = f"{tool} {_words(action[len(tool) + 1 :])}"
    else:
        subject = _words(action) or tool or "the step"
    return f"when {subject} fails" + (f" with {' and '.join(errors)}" if errors else "")


def contrastive_proposal(failure: dict, successes: list[dict]) -> Proposal | Skipped:
    """The contrastive extractor on plain data: one failure (with `id`, `steps`, `signature`,
    `notices`, `scope`) and the successful sessions of its family (`id`, `steps`). Pure."""
    atoms = fault_atoms(failure)
    target = next((_value(a) for a in atoms if _key(a) == "action"), "")
    if not target or not any(_key(a) == "error" for a in atoms):
        return Skipped(failure["id"], "the failure names no failing action and error")
    if not successes:
        return Skipped(failure["id"], f"no successful session ran {target} to compare with")
    failed_actions = {a for a, _ in _step_actions(failure["steps"])}
    support: Counter[str] = Counter()
    before: Counter[str] = Counter()
    commands: dict[str, str] = {}
    for success in successes:
        steps = _step_actions(success["steps"])
        last_target = max((i for i, (a, _) in enumerate(steps) if a == target), default=None)
        seen = set()
        for i, (action, command) in enumerate(steps):
            if action == target or action in failed_actions or action in seen:
                continue
            seen.add(action)
            support[action] += 1
            commands.setdefault(action, command)
            if last_target is not None and i < last_target:
                before[action] += 1
    if not support:
        return Skipped(failure["id"], "the successes took no step the failure did not")
    # Most support first; ties go to the action that came before the target more often.
    helper, count = max(support.items(), key=lambda kv: (kv[1], before[kv[0]], kv[0]))
    if count / len(successes) < MIN_SUPPORT:
        return Skipped(
            failure["id"],
            f"no step is shared by half the {len(successes)} successes (best: {helper}, {count})",
        )
    phrase = ACTION_PHRASES.get(helper, f"run {commands[helper]}")
    verb = target.rpartition(".")[2]
    when = f"before {_gerund(verb)}" if before[helper] * 2 >= count else f"after a failed {verb}"
    command = commands[helper]
    directive = f"{phrase} {when}" + (f": {command}" if command and command not in phrase else "")
    return Proposal(
        trigger=trigger_text(atoms),
        directive=directive,
        scope=failure.get("scope") or "global",
        metric=failure.get("metric") or "",
        signature=sorted(atom_lib.failure_mode_atoms(atoms)),
        source_case=failure["id"],
        extractor="contrastive",
        provenance={
            "extractor": "contrastive",
            "failure": failure["id"],
            "successes": [s["id"] for s in successes],
            "step": f"action:{helper}",
            "support": f"{count}/{len(successes)}",
        },
    )


def recovery_proposal(
    atoms: list[str], recoveries: list[dict], source_case: str
) -> Proposal | Skipped:
    """The recovery extractor on plain data: a family's atoms (`action:…`, `error:…`) and the
    recoveries its sessions recorded (`{atoms, how, fix_actions, fix_commands}`). Pure."""
    target = next((_value(a) for a in atoms if _key(a) == "action"), "")
    mine = [r for r in recoveries if set(atoms) <= set(r.get("atoms") or [])]
    if not target or not mine:
        return Skipped(source_case, "no session of this family recovered from it")
    support: Counter[str] = Counter()
    commands: dict[str, str] = {}
    for recovery in mine:
        if recovery.get("how") == "retried":
            support[RETRIED] += 1
            continue
        actions = recovery.get("fix_actions") or []
        said = recovery.get("fix_commands") or []
        # Each helping action counts once a recovery; its command is the first fix that ran it.
        for atom in dict.fromkeys(actions):
            action = _value(atom)
            if action in LOOKING or action == target:
                continue
            support[action] += 1
            words = action.replace(".", " ")
            command = next((c for c in said if words in c), "")
            if command:
                commands.setdefault(action, command)
    if not support:
        return Skipped(source_case, "its recoveries only looked around before retrying")
    helper, count = max(support.items(), key=lambda kv: (kv[1], kv[0] != RETRIED, kv[0]))
    if count * 2 < len(mine):
        return Skipped(
            source_case,
            f"no step is shared by half the {len(mine)} recoveries (best: {helper}, {count})",
        )
    verb = target.rpartition(".")[2]
    if helper == RETRIED:
        directive = f"retry the {verb} once as it is before changing anything"
    else:
        command = commands.get(helper, "")
        phrase = ACTION_PHRASES.get(helper, f"run {command or helper}")
        directive = f"{phrase} before {_gerund(verb)}" + (
            f": {command}" if command and command not in phrase else ""
        )
    return Proposal(
        trigger=trigger_text(atoms),
        directive=directive,
        scope="global",
        metric="",
        signature=sorted(atom_lib.failure_mode_atoms(atoms)),
        source_case=source_case,
        extractor="recovery",
        provenance={
            "extractor": "recovery",
            "family": " ".join(sorted(atoms)),
            "step": helper if helper == RETRIED else f"action:{helper}",
            "support": f"{count}/{len(mine)}",
        },
    )


def family_sessions(atoms: list[str]) -> tuple[str, list[dict]]:
    """The newest failing case of a family (its source case) and its sessions' recoveries."""
    sessions = Trajectory.objects.filter(
        kind__in=(TrajectoryKind.FAILURE, TrajectoryKind.NEAR_MISS)
    )
    for atom in atoms:
        sessions = sessions.filter(
            pk__in=TrajectoryAtom.objects.filter(atom=atom).values("trajectory_id")
        )
    rows = list(
        sessions.order_by(F("started_at").desc(nulls_last=True), "id").values_list(
            "id", "kind", "meta__recoveries"
        )[:FAMILY_SESSIONS]
    )
    if not rows:
        raise FamilyNotFound(f"no failing session carries {' '.join(atoms)}")
    source = next((tid for tid, kind, _ in rows if kind == TrajectoryKind.FAILURE), rows[0][0])
    return source, [r for _, _, found in rows for r in (found if isinstance(found, list) else [])]


class FamilyNotFound(Exception):
    pass


def _scope(t: Trajectory) -> str:
    ri = t.replay_input if isinstance(t.replay_input, dict) else {}
    return ri.get("scope") or (t.meta or {}).get("scope") or "global"


def _metric(t: Trajectory, registry) -> str:
    """The metric the failure breached first, if the registry knows it."""
    for notice in t.notices or []:
        if _key(notice) == "breach":
            info = registry.resolve(atom_lib.notice_metric(notice))
            if info is not None:
                return info.name
    return ""


def failure_families(case_ids: list[str] | None = None) -> list[tuple[dict, list[dict]]]:
    """One representative failure per family (same failure-mode atoms; the lowest id), with
    the successes that ran its failing action. Plain data for the extractors."""
    registry = load_registry()
    failures = Trajectory.objects.filter(kind=TrajectoryKind.FAILURE).order_by("id")
    if case_ids:
        failures = failures.filter(pk__in=case_ids)
    families: dict[frozenset[str], Trajectory] = {}
    for t in failures:
        families.setdefault(atom_lib.failure_mode_atoms(t.signature), t)
    out = []
    for t in families.values():
        as_dict = {
            "id": t.id,
            "task": t.task,
            "steps": t.steps,
            "signature": t.signature,
            "notices": t.notices,
            "scope": _scope(t),
            "metric": _metric(t, registry),
        }
        action = next((a for a in fault_atoms(as_dict) if _key(a) == "action"), None)
        successes = (
            Trajectory.objects.filter(kind=TrajectoryKind.SUCCESS, atoms__atom=action)
            .order_by("-started_at", "id")
            .values("id", "steps")
            if action
            else []
        )
        out.append((as_dict, list(successes)))
    return out


class LlmNotConfigured(Exception):
    pass


class LlmAnswerError(Exception):
    """The endpoint failed or answered something that is not a rule; nothing is recorded."""


LLM_SYSTEM_PROMPT = (
    "You turn one failed AI-agent session into a standing rule for future sessions. Answer "
    'with one JSON object and nothing else: {"trigger": "when …", "directive": "…"}. The '
    "trigger names the failure (tool, action, error) so it can be recognised; the directive "
    "says what to do instead, in one short imperative sentence."
)


def llm_configured() -> bool:
    return bool(settings.CAUTERWEB_LLM_BASE_URL and settings.CAUTERWEB_LLM_MODEL)


def require_llm() -> None:
    if not llm_configured():
        raise LlmNotConfigured(
            "the LLM extractor is not configured: set CAUTERWEB_LLM_BASE_URL and "
            "CAUTERWEB_LLM_MODEL (and CAUTERWEB_LLM_API_KEY if the endpoint needs one)"
        )


def _llm_user_message(failure: dict) -> str:
    steps = [
        {k: str(step.get(k) or "")[:400] for k in ("tool", "input", "output", "error")}
        for step in failure["steps"][:12]
    ]
    return (
        f"Task: {failure['task']}\nFailure signature: {', '.join(failure['signature'])}\n"
        f"Steps (JSON): {steps}"
    )


def parse_llm_answer(body: object) -> dict:
    """{"trigger", "directive"} from a chat-completions response body; LlmAnswerError naming
    what is wrong otherwise."""
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise LlmAnswerError("the endpoint's answer has no choices[0].message.content") from None
    text = (content or "").strip()
    if text.startswith("```"):
        # Models often fence JSON despite being asked not to.
        text = text.strip("`").removeprefix("json").strip()
    try:
        answer = json.loads(text)
    except json.JSONDecodeError:
        raise LlmAnswerError(f"the model's answer is not JSON: {text[:200]!r}") from None
    if not isinstance(answer, dict):
        raise LlmAnswerError(f"the model's answer is not a JSON object: {text[:200]!r}")
    rule = {}
    for part in ("trigger", "directive"):
        value = answer.get(part)
        if not isinstance(value, str) or not value.strip():
            raise LlmAnswerError(f"the model's answer has no {part}: {text[:200]!r}")
        rule[part] = value.strip()
    return rule


def llm_proposal(failure: dict, *, timeout_s: float = 60.0) -> Proposal:
    require_llm()
    url = settings.CAUTERWEB_LLM_BASE_URL.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json"}
    if settings.CAUTERWEB_LLM_API_KEY:
        headers["Authorization"] = f"Bearer {settings.CAUTERWEB_LLM_API_KEY}"
    payload = {
        "model": settings.CAUTERWEB_LLM_MODEL,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": LLM_SYSTEM_PROMPT},
            {"role": "user", "content": _llm_user_message(failure)},
        ],
    }
    import requests  # by the LLM extractor alone: every command would pay for it at start-up

    try:
        response = requests.post(url, json=payload, headers=headers, timeout=timeout_s)
        response.raise_for_status()
        body = response.json()
    except requests.RequestException as exc:
        raise LlmAnswerError(f"the LLM endpoint failed for {failure['id']}: {exc}") from None
    except ValueError:
        raise LlmAnswerError(f"the LLM endpoint answered {failure['id']} with non-JSON") from None
    try:
        rule = parse_llm_answer(body)
    except LlmAnswerError as exc:
        raise LlmAnswerError(f"{failure['id']}: {exc}") from None
    return Proposal(
        **rule,
        scope=failure["scope"],
        metric=failure["metric"],
        signature=sorted(atom_lib.failure_mode_atoms(fault_atoms(failure))),
        source_case=failure["id"],
        extractor="llm",
        provenance={
            "extractor": "llm",
            "model": settings.CAUTERWEB_LLM_MODEL,
            "failure": failure["id"],
        },
    )


@dataclass
class ExtractionRun:
    proposals: list[Proposal]
    skipped: list[Skipped]
    created: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "created": len(self.created),
            "unchanged": len(self.unchanged),
            "rules": self.created + self.unchanged,
            "proposals": [p.as_dict() for p in self.proposals],
            "skipped": [asdict(s) for s in self.skipped],
        }


def extract_candidates(*, llm: bool = False, case_ids: list[str] | None = None) -> ExtractionRun:
    """Propose candidates for every failure family and record them, all or nothing: every
    proposal (and every LLM call) is made before anything is written."""
    if llm:
        require_llm()
    proposals: list[Proposal] = []
    skipped: list[Skipped] = []
    for failure, successes in failure_families(case_ids):
        result = contrastive_proposal(failure, successes)
        (proposals if isinstance(result, Proposal) else skipped).append(result)
        if llm:
            proposals.append(llm_proposal(failure))
    run = ExtractionRun(proposals, skipped)
    _record(run)
    return run


def _record(run: ExtractionRun) -> None:
    """Every proposal recorded as a candidate by its extractor, all or nothing."""
    # One round for the whole run, not one per candidate (semantics §9.1).
    with signals.one_announcement(), compared_in_one_task(), transaction.atomic():
        for p in run.proposals:
            rule, created = rule_record_candidate(
                actor=Actor.extractor(p.extractor),
                trigger=p.trigger,
                directive=p.directive,
                scope=p.scope,
                metric=p.metric,
                signature=p.signature,
                source_case=p.source_case,
                tags=[f"extractor:{p.extractor}"],
                provenance=p.provenance,
            )
            (run.created if created else run.unchanged).append(rule.id)


def extract_from_family(*, atoms: list[str]) -> ExtractionRun:
    """Propose (and record, as the extractor) the rule a failure family's recoveries teach."""
    source, recoveries = family_sessions(atoms)
    result = recovery_proposal(atoms, recoveries, source)
    run = ExtractionRun(
        [result] if isinstance(result, Proposal) else [],
        [] if isinstance(result, Proposal) else [result],
    )
    _record(run)
    return run
