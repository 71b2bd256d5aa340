"""Extraction accuracy: is the extracted rule the same rule as the expected one? (SPEC §12)

Pure functions, plain data in and out; the page, the API and `compare_rules` call them.

Token-F1 is kept as the naive baseline and is never the verdict: it punishes a correct
rule for rewording ("if the remote rejects your push…" for "when git push fails with
non-fast-forward") and rewards a wrong one that shares the words ("…fails with
authentication denied"). The verdict instead weighs three kinds of evidence:

- failure-mode atoms read from the trigger prose (`tool:git`, `action:git.push`,
  `error:non_fast_forward`, `status:429`) compared as atoms (SPEC §1, §11): a conflicting
  error class, status code, action or tool is strong evidence of a different rule;
- stance cues read from the directive (back off vs retry at once, a bypass such as
  `--no-verify` or `verify=False`, raise vs lower, enable vs disable, negation, swapped
  preference or order) and the acts its verbs name (stash vs discard);
- a key term swapped in an otherwise verbatim sentence ("connection refused" for
  "connection timed out"), unless the two terms are synonyms, share a stem or name the
  same atoms;
- a semantic score from an offline embedding model (`comparison.semantic`), taken
  mostly over the words the two texts do *not* share — the part where a
  same-words-other-meaning pair hides its difference.

Every constant below was set on the dev split of comparison/data/extraction_eval.jsonl;
bench/bench_extraction.py prints the figures on dev and on the held-out split.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

# ---------------------------------------------------------------------------
# Words

_TOKEN = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=16384)
def _tokens(text: str) -> tuple[str, ...]:
    return tuple(_TOKEN.findall(text.lower()))


def token_f1(a: str, b: str) -> float:
    """Multiset token-overlap F1 (SQuAD style), the naive baseline of SPEC §12."""
    ta, tb = _tokens(a), _tokens(b)
    if not ta and not tb:
        return 1.0
    if not ta or not tb:
        return 0.0
    common = sum((Counter(ta) & Counter(tb)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(tb), common / len(ta)
    return 2 * precision * recall / (precision + recall)


def word_diff(expected: str, extracted: str) -> list[tuple[str, str]]:
    """Word-level diff in reading order: ("keep" | "delete" | "insert", word).

    "delete" is a word only the expected rule has, "insert" one only the extracted rule
    has. Words are compared case-insensitively and shown as the extracted text (or, for a
    deletion, the expected text) spells them, so the dashboard can highlight them as is.
    """
    return list(_word_diff(expected, extracted))


@lru_cache(maxsize=8192)
def _word_diff(expected: str, extracted: str) -> tuple[tuple[str, str], ...]:
    exp_words, ext_words = expected.split(), extracted.split()
    matcher = difflib.SequenceMatcher(
        a=[_norm_word(w) for w in exp_words], b=[_norm_word(w) for w in ext_words], autojunk=False
    )
    ops: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            ops.extend(("keep", w) for w in ext_words[j1:j2])
            continue
        # A replacement reads best as "what went, then what came".
        ops.extend(("delete", w) for w in exp_words[i1:i2])
        ops.extend(("insert", w) for w in ext_words[j1:j2])
    return tuple(ops)


def _norm_word(word: str) -> str:
    return word.lower().strip(".,;:!?\"'()[]")


# ---------------------------------------------------------------------------
# Failure-mode atoms (SPEC §1: `tool:`, `action:`, `error:` and any other key)

# Tools by name. Only named tools count: "the remote rejects your push" names none,
# which is "not said", never a conflict.
_TOOLS: dict[str, str] = {
    "git": r"\bgit\b|\bgithub\b(?! actions)|\bgitlab\b",
    "pip": r"\bpip3?\b|\bpypi\b",
    "npm": r"\bnpm\b",
    "yarn": r"\byarn\b",
    "pnpm": r"\bpnpm\b",
    "cargo": r"\bcargo\b|\brustc\b",
    "go": r"\bgo (?:build|test|mod|get|run|vet|install|toolchain)\b|\bgo\.(?:sum|mod)\b|\bgolang\b",
    "maven": r"\bmaven\b|\bmvn\b",
    "gradle": r"\bgradle\b",
    "conda": r"\bconda\b|\bmamba\b",
    "poetry": r"\bpoetry\b",
    "docker": r"\bdocker\b|\bdockerfile\b|\bdocker-compose\b",
    "kubernetes": r"\bkubectl\b|\bkubernetes\b|\bk8s\b|\bpods?\b",
    "helm": r"\bhelm\b",
    "terraform": r"\bterraform\b",
    "aws": r"\baws\b|\bs3\b|\bec2\b|\blambda\b|\bcloudformation\b",
    "gcloud": r"\bgcloud\b|\bgoogle cloud\b|\bgcp\b|\bgke\b",
    "azure": r"\baz\b|\bazure\b",
    "postgres": r"\bpostgres(?:ql)?\b|\bpsql\b",
    "mysql": r"\bmysql\b|\bmariadb\b",
    "sqlite": r"\bsqlite3?\b",
    "redis": r"\bredis\b",
    "celery": r"\bcelery\b",
    "nginx": r"\bnginx\b",
    "systemd": r"\bsystemd\b|\bsystemctl\b|\bjournalctl\b",
    "ssh": r"\bssh\b|\bsshd\b|\bknown_hosts\b",
    "pytest": r"\bpytest\b",
    "jest": r"\bjest\b",
    "vim": r"\bn?vim\b",
    "vscode": r"\bvs ?code\b|\bvisual studio code\b",
    "github_actions": r"\bgithub actions\b|\bworkflow\b",
    "terraform_cloud": r"\bterraform cloud\b",
}

# Verbs a trigger is "about". Values are the canonical action; the regex tolerates the
# usual inflections and nouns ("pushing", "the push", "a merge").
_ACTIONS: dict[str, str] = {
    "push": r"\bpush(?:es|ed|ing)?\b",
    "pull": r"\bpull(?:s|ed|ing)?\b(?! request)",
    "clone": r"\bclon(?:e|es|ed|ing)\b",
    "merge": r"\bmerg(?:e|es|ed|ing)\b",
    "rebase": r"\brebas(?:e|es|ed|ing)\b",
    "checkout": r"\bcheck(?:ing)? ?out\b|\bcheckout\b|\bswitch(?:ing)? branch(?:es)?\b",
    "commit": r"\bcommit(?:s|ted|ting)?\b",
    "fetch": r"\bfetch(?:es|ed|ing)?\b",
    "install": r"\binstall(?:s|ed|ing|ation)?\b",
    "publish": r"\bpublish(?:es|ed|ing)?\b",
    "build": r"\bbuild(?:s|ing)?\b|\bbuilt\b|\bcompil(?:e|es|ed|ing|ation)\b",
    "deploy": r"\bdeploy(?:s|ed|ing|ment)?\b|\brollout\b|\broll(?:ing)? out\b",
    "upload": r"\bupload(?:s|ed|ing)?\b",
    "download": r"\bdownload(?:s|ed|ing)?\b",
    "migrate": r"\bmigrat(?:e|es|ed|ing|ion|ions)\b|\bschema change\b",
    "login": r"\blog(?:ging)? ?in\b|\bsign(?:ing)? ?in\b|\blogin\b",
    "apply": r"\bapply\b|\bapplies\b|\bapplying\b",
    "upgrade": r"\bupgrad(?:e|es|ed|ing)\b",
    "insert": r"\binsert(?:s|ed|ing)?\b",
    "start": r"\bstart(?:s|ed|ing|up)?\b|\bboot(?:s|ing)?\b|\blaunch(?:es|ed|ing)?\b",
    "restart": r"\brestart(?:s|ed|ing)?\b",
    "write": r"\bwrit(?:e|es|ing|ten)\b|\bsav(?:e|es|ing)\b",
    "read": r"\bread(?:s|ing)?\b|\bopen(?:s|ed|ing)?\b|\bdecod(?:e|es|ing)\b",
    "delete": r"\bdelet(?:e|es|ed|ing)\b|\bdrop(?:s|ped|ping)?\b",
    "query": r"\bquer(?:y|ies|ying)\b|\bselect\b",
    "test": r"\btests?\b|\btesting\b",
    "run": r"\bruns?\b|\brunning\b|\bexecut(?:e|es|ed|ing)\b",
}

# Error classes: the canonical failure and the ways people and tools spell it.
# Order does not matter; a text may carry several (a 401 from an expired token is both
# `auth_denied` and `token_expired`).
_ERRORS: dict[str, str] = {
    "non_fast_forward": (
        r"non[- ]?fast[- ]?forward|not a fast[- ]forward|fetch first|tip of your current branch "
        r"is behind|(?:remote|upstream|server)[^.;]{0,40}(?:contains|has|have) (?:new )?(?:work|commits"
        r"|changes)[^.;]{0,40}(?:you|we) (?:do not|don't|did not) have|updates were rejected"
    ),
    "auth_denied": (
        r"authentication (?:failed|denied|error|required)|auth(?:entication)? denied|could not "
        r"authenticate|invalid credentials|bad credentials|publickey|no accepted key|\bunauthori[sz]"
        r"ed\b(?! ?operation)|\b401\b|not authenticated|login failed|signature (?:does not|doesn't) "
        r"verify|signature is invalid|invalid signature|credentials? (?:rejected|refused)"
    ),
    "token_expired": (
        r"expiredtoken|(?:token|credential|session|certificate)s?[^.;]{0,30}(?:expired|no longer "
        r"valid|has expired)|expired (?:token|session|credentials)"
    ),
    "forbidden": (
        r"\b403\b|\bforbidden\b|access ?denied|not authori[sz]ed to|unauthorizedoperation|lacks? "
        r"(?:the )?(?:scope|permission|right)|insufficient (?:scope|permission|privilege)s?|\brbac\b"
        r"|publish rights"
    ),
    "permission_denied": (
        r"permission denied(?! \(publickey)|\beacces\b|\beperm\b|operation not permitted|not (?:allowed"
        r"|permitted) to (?:write|create|open|read|modify|execute)|read-only file ?system|refused for "
        r"your user"
    ),
    "not_found": (
        r"no such file|\benoent\b|file not found|(?:does not|doesn't|no longer) exist|cannot be "
        r"found|could not find|can't find|\bmissing\b|\b404\b|not found(?! in path)|dangling"
    ),
    "is_a_directory": r"is a directory|\beisdir\b",
    "command_not_found": (
        r"command not found|no such command|cannot find the executable|executable[^.;]{0,20}(?:not "
        r"found|missing)|not found in path|\bcode 127\b"
    ),
    "already_exists": r"already exists?|duplicate column|already (?:has|defined)",
    "unique_violation": (
        r"unique (?:constraint|violation|key)|duplicate key|collides? with an existing|integrityerror"
    ),
    "foreign_key_violation": r"foreign key",
    "port_in_use": (
        r"port[^.;]{0,25}(?:already allocated|in use|taken)|eaddrinuse|address (?:already )?in use"
    ),
    "deadlock": r"deadlock",
    "serialization_failure": r"serializ(?:ation|able) failure|could not serialize",
    "locked": (
        r"\b(?:is|are|was) locked\b|lock (?:wait )?time ?out|waiting for a lock|(?:on|for) a lock"
        r"|lock (?:held|taken)|locked by|held by another|another operation is in progress|operation "
        r"(?:is )?(?:in progress|pending)|pending (?:install|upgrade|release|operation)|\bstate lock"
    ),
    "corrupt": r"malformed(?! json| parameters)|corrupt",
    "timeout": (
        r"timed? ?out\b|\btimeouts?\b|time limit|deadline exceeded|never (?:returns|responds|"
        r"completes)|\bhangs?\b|\bhanging\b|gives? up waiting|no response|\bstall(?:s|ed)?\b"
    ),
    "retries_exhausted": r"retr(?:y|ies) limit|max(?:imum)? retries|retries exhausted",
    "connection_refused": (
        r"connection (?:is )?refused|econnrefused|not accepting connections|(?:cannot|can't|could "
        r"not|unable to) connect|unreachable"
    ),
    "rate_limited": (
        r"\b429\b|too many requests|rate[- ]?limit|throttl|slow ?down|request rate|slowdown"
    ),
    "quota_exceeded": r"\bquota\b",
    "capacity": r"insufficient ?instance ?capacity|out of capacity",
    "unavailable": r"\b503\b|service unavailable|temporarily unavailable|\bunavailable\b",
    "bad_gateway": (
        r"\b502\b|bad gateway|(?:invalid|valid) response from (?:the )?(?:upstream|backend)"
    ),
    "gateway_timeout": r"\b504\b|gateway time-?out",
    "payload_too_large": (
        r"\b413\b|payload too large|entity too large|(?:request )?body[^.;]{0,15}too (?:big|large)"
    ),
    "file_too_large": (
        r"(?:file|blob|object|binary)[^.;]{0,30}(?:exceeds|over \d|larger than|too (?:large|big))"
        r"|exceeds the (?:file )?size limit|too large to read"
    ),
    "unsupported_media_type": r"\b415\b|unsupported media type",
    "http_conflict": r"\b409\b",
    "server_error": r"\b500\b|internal server error",
    "bad_request": r"\b400\b|bad request",
    "merge_conflict": r"conflict(?:ing)? (?:changes|markers)|merge conflict|\bCONFLICT\b",
    "out_of_memory": (
        r"out of memory|outofmemoryerror|\boom\b|oom[- ]?kill|memory (?:limit|exhausted|pressure)|too "
        r"much memory|\bcode 137\b|\bheap\b"
    ),
    "disk_full": (
        r"no space left|\benospc\b|disk (?:is )?full|out of disk|disk space|disk pressure|disk quota"
    ),
    "too_many_connections": (
        r"too many (?:client )?connections|(?:connection )?pool (?:is )?exhausted|connections? (?:are )?"
        r"(?:all )?in use|all (?:are )?in use|cannot get a (?:database )?connection"
    ),
    "too_many_open_files": r"too many open files|\bemfile\b",
    "tls_error": r"\bcertificate\b|\btls\b|\bssl\b|\bx509\b",
    "host_key_changed": r"host key|host identification|remote host identification",
    "decode_error": r"unicodedecodeerror|\bdecod(?:e|ing)\b|\bencoding\b|\bcodec\b",
    "recursion_limit": r"recursionerror|recursion depth|maximum recursion",
    "key_error": r"\bkeyerror\b",
    "index_error": r"\bindexerror\b",
    "import_error": (
        r"importerror|modulenotfounderror|cannot import|can't import|no module named|import errors?"
        r"|missing modules?|circular import|import each other"
    ),
    "circular_import": r"circular import|import each other|import cycle",
    "type_error": r"mismatched types|typeerror|type mismatch",
    "borrow_error": r"borrow of moved|moved value|borrow checker",
    "undefined_symbol": r"undefined:|undefined (?:symbol|reference|name)|nameerror",
    "dependency_conflict": (
        r"resolution ?impossible|\beresolve\b|unable to resolve dependency|conflicting (?:versions|"
        r"dependenc|peer)|cannot (?:be )?satisf|version constraints|peer dependenc|dependency (?:graph|"
        r"tree)"
    ),
    "artifact_not_found": (
        r"no matching distribution|could not find a version|manifest unknown|tag (?:does not|doesn't) "
        r"exist|image (?:is )?not found|not found in (?:the )?registry|(?:download|fetch|resolve) an "
        r"artifact|resolve a dependency from|chart (?:is )?not found|no wheel|not available for this "
        r"platform"
    ),
    "repo_not_found": r"repository not found|repo not found|not a git repository",
    "lockfile_mismatch": (
        r"lock ?file[^.;]{0,40}(?:out of sync|does not match|needs? (?:to be )?updat|modif)|(?:out of"
        r" sync|does not match)[^.;]{0,30}(?:package-lock|lock ?file|\.lock)|--locked|--frozen"
    ),
    "cache_miss": r"cache key|cache miss|misses (?:its|the) (?:\w+ )?cache|cold cache",
    "externally_managed": r"externally[- ]managed|managed by the os",
    "hook_failed": r"pre-commit|commit hook|\bhook\b",
    "detached_head": r"detached head|head (?:was|is) not on a branch|not on a branch",
    "protected_branch": r"protected branch|branch protection",
    "uncommitted_changes": (
        r"(?:uncommitted|local) (?:changes|edits|modifications)|would be (?:overwritten|lost)"
    ),
    "crash_loop": r"crashloopbackoff|keeps? (?:on )?restarting|restart(?:s|ing)? (?:loop|repeatedly)",
    "image_pull_failed": r"image ?pull ?back ?off|err ?image ?pull|(?:cannot|can't|fails? to) pull (?:its |the )?image",
    "unschedulable": r"unschedulable|stays? pending|stuck in pending|(?:cannot|can't) (?:place|schedule)",
    "evicted": r"\bevict",
    "probe_failed": r"\bprobe\b",
    "api_disabled": (
        r"api (?:is )?not enabled|(?:api|service) (?:is )?disabled|has not been used in (?:the )?project"
    ),
    "flaky": r"\bflak(?:y|iness)\b|\bsometimes\b|intermittent|\brace\b|\btiming\b",
    "test_isolation": r"pass(?:es)? alone|only in a full run|leak(?:s|ing)? state|run together",
    "assertion_failed": r"\bassert(?:ion)?(?:error)?\b",
    "coverage_low": r"\bcoverage\b",
    "slow": r"\bslow(?:ly|er)?\b(?! ?down)|sequential scan|seq scan|full table scan|takes forever",
    "n_plus_one": r"n\+1|one query per row",
    "invalid_json": r"invalid json|malformed json|not valid json|jsondecodeerror",
    "schema_mismatch": (
        r"(?:do not|does not|don't) match the schema|malformed (?:parameters|arguments)|invalid "
        r"arguments|schema validation"
    ),
    "truncated": r"truncat|max[_ ]?tokens|finish_reason length|cut off",
    "context_overflow": r"context (?:window|length)|prompt is too long",
    "cors": r"\bcors\b|preflight",
    "float_precision": r"\bfloat|rounding",
    "overflow": r"\boverflow",
    "syntax_error": r"syntaxerror|syntax error|parse error",
    "invalid_grant": r"invalid_grant",
    "invalid_client": r"invalid_client",
}

# Qualifiers that flip a trigger's meaning while sharing its words.
_STATES: dict[str, str] = {
    "behind": r"\bbehind\b",
    "ahead": r"\bahead\b",
    "intended": r"(?<!un)\bintended\b|\bintentional\b|\bexpected change\b",
    "unintended": r"\bunintended\b|\bunintentional\b|\bunexpected change\b",
    "fork": r"\bfork(?:s|ed)?\b",
    "failing": r"\bfail(?:s|ed|ing|ure)?\b|\berrors? out\b|\bbreaks?\b|\brejected\b|\brefused\b",
    "passing": r"\bpass(?:es|ed)?\b|\bsucceed(?:s|ed)?\b|\bsuccessful(?:ly)?\b|\bworks\b|\bgreen\b",
    "production": r"\bprod(?:uction)?\b|\blive (?:site|system|environment)\b",
    "staging": r"\bstag(?:e|ing) (?:env|environment|server|cluster)|\bstaging\b",
    "local": r"\blocal(?:ly)? (?:machine|env|environment|dev)|\bon your laptop\b|\blocalhost\b",
    "windows": r"\bwindows\b|\bpowershell\b",
    "macos": r"\bmac ?os\b|\bdarwin\b|\bhomebrew\b",
    "linux": r"\blinux\b|\bubuntu\b|\bdebian\b|\balpine\b",
}

_HTTP_STATUS = re.compile(
    r"\b([45]\d\d)\b(?!\s*(?:mb|gb|kb|ms|s\b|sec|seconds|minutes|%|mib|gib|bytes|lines|rows|files))",
    re.I,
)
_EXIT_CODE = re.compile(
    r"\b(?:exit(?:s|ed)?|exit code|code|status)\s*(?:with\s*)?(?:code\s*)?(\d{1,3})\b"
)
# Identifiers a tool prints verbatim (ERESOLVE, ExpiredToken, invalid_grant): they name a
# failure exactly, so two different ones are as good as two different error classes.
_IDENTIFIER = re.compile(
    r"\b(?:[A-Z]{4,}[A-Z0-9_]*|[a-z]+_[a-z_]+|[A-Z][a-z]+(?:[A-Z][a-z0-9]+)+)\b"
)
_IGNORED_IDENTIFIERS = {"HEAD", "TODO", "NULL", "JSON", "HTTP", "HTTPS", "CORS", "UTF"}


class _Lexicon:
    """Named patterns, searched behind shared gates, on lower-cased text.

    A trigger is checked against ~150 patterns and most never match. Each gate is one
    alternation of a handful of patterns, so a text pays for the few gates that hit plus
    the patterns behind them. Patterns are written in lower case and matched without
    re.IGNORECASE, which costs Python's regex engine several times more per character;
    the rare case-sensitive one (git's "CONFLICT") sees the original text.
    """

    def __init__(self, patterns: dict[str, str], *, case_sensitive=(), size=16):
        self.case_sensitive = frozenset(case_sensitive)
        self.patterns = {name: re.compile(p) for name, p in patterns.items()}
        names = list(patterns)
        # Without its word boundaries a gate only matches more, so it stays a safe
        # pre-check; a case-sensitive member is let through its gate in any case.
        self.gates = [
            (
                re.compile("|".join(self._gate_source(n, patterns[n]) for n in chunk)),
                [(n, self.patterns[n], n in self.case_sensitive) for n in chunk],
            )
            for chunk in (names[i : i + size] for i in range(0, len(names), size))
        ]

    def _gate_source(self, name: str, pattern: str) -> str:
        loose = pattern.replace(r"\b", "")
        return f"(?i:{loose})" if name in self.case_sensitive else f"(?:{loose})"

    def found(self, text: str) -> list[str]:
        """Names of the patterns that match, in declaration order."""
        low = text.lower()
        return [
            name
            for gate, members in self.gates
            if gate.search(low)
            for name, rx, exact in members
            if rx.search(text if exact else low)
        ]


_TOOL_LEXICON = _Lexicon(_TOOLS)
_ACTION_LEXICON = _Lexicon(_ACTIONS)
_ERROR_LEXICON = _Lexicon(_ERRORS, case_sensitive={"merge_conflict"})
_STATE_LEXICON = _Lexicon(_STATES)
_KNOWN_LEXICON = _Lexicon({**_ERRORS, **{f"tool:{k}": v for k, v in _TOOLS.items()}})
_COMPILED_TOOLS = _TOOL_LEXICON.patterns
_COMPILED_ACTIONS = _ACTION_LEXICON.patterns
_COMPILED_ERRORS = _ERROR_LEXICON.patterns
# One pass to ask "does any error class or tool name cover this identifier?".

_TOOL_VERB = re.compile(
    r"\b(git|npm|pip3?|yarn|pnpm|cargo|go|docker|kubectl|helm|terraform|mvn|gradle|conda|poetry|"
    r"gcloud|az|aws)\s+([a-z][a-z-]+)\b",
    re.I,
)
_TOOL_ALIASES = {"pip3": "pip", "mvn": "maven", "kubectl": "kubernetes"}
_NOT_SUBCOMMANDS = {
    "says",
    "say",
    "reports",
    "report",
    "complains",
    "cannot",
    "can",
    "fails",
    "fail",
    "failed",
    "is",
    "was",
    "has",
    "the",
    "a",
    "an",
    "with",
    "over",
    "to",
    "and",
    "or",
    "commands",
    "command",
    "refuses",
    "rejects",
    "returns",
    "toolchain",
    "cli",
    "daemon",
    "will",
    "does",
    "did",
    "errors",
    "error",
    "asks",
    "warns",
    "keeps",
    "hangs",
    "times",
}

# The word a trigger hangs on ("when X fails with Y"): the action closest to the start.
_TRIGGER_CONDITION = re.compile(
    r"\b(?:fails?|failed|failing|errors?|rejected|refused|returns?|responds?|answers?|raises?|"
    r"exits?|stops?|complains?|breaks?|says|reports?|stuck|hangs?|times? out|with|because|on)\b",
    re.I,
)


def trigger_atoms(text: str) -> set[str]:
    """Failure-mode atoms read from prose, e.g.

    "when git push fails with non-fast-forward"
    → {"tool:git", "action:git.push", "error:non_fast_forward"}.

    Keys: `tool`, `action` (`<tool>.<verb>` when one tool is named, else the bare verb),
    `error` (canonical class), `status` (HTTP status), `exit` (process exit code), `code`
    (a verbatim identifier such as `invalid_grant` that no error class covers) and `state`
    (qualifiers such as behind/ahead). Atoms that are not said are absent: absence is never
    a conflict.
    """
    return set(_trigger_atoms(text))


# An expected rule is compared with every candidate extracted for it, and duplicate
# detection compares the same candidates again and again: memoise the prose parsing.
@lru_cache(maxsize=8192)
def _trigger_atoms(text: str) -> frozenset[str]:
    atoms: set[str] = set()
    tools = _TOOL_LEXICON.found(text)
    atoms.update(f"tool:{t}" for t in tools)

    # "git push", "npm ci", "kubectl apply": a tool's own subcommand names the action
    # exactly, so two different ones are two different triggers.
    for m in _TOOL_VERB.finditer(text):
        word = m.group(2).lower()
        if word in _NOT_SUBCOMMANDS:
            continue
        canonical = next(
            (v for v in _ACTION_LEXICON.found(word) if _COMPILED_ACTIONS[v].fullmatch(word)), word
        )
        atoms.add(f"action:{_TOOL_ALIASES.get(m.group(1).lower(), m.group(1).lower())}.{canonical}")
    if not any(a.startswith("action:") for a in atoms):
        # Otherwise the verbs named before the failure is described are what the trigger
        # is about; verbs after it ("…because local edits would be lost") describe it.
        low = text.lower()
        cut = _TRIGGER_CONDITION.search(low)
        verbs = _first_verbs(low[: cut.end()] if cut else low) or _first_verbs(low)
        atoms.update(f"action:{v}" for v in verbs)

    errors = set(_ERROR_LEXICON.found(text))
    atoms.update(f"error:{e}" for e in errors)
    atoms.update(f"state:{s}" for s in _STATE_LEXICON.found(text))

    for m in _HTTP_STATUS.finditer(text):
        atoms.add(f"status:{m.group(1)}")
    for m in _EXIT_CODE.finditer(text.lower()):
        if not 400 <= int(m.group(1)) < 600:
            atoms.add(f"exit:{m.group(1)}")
    for m in _IDENTIFIER.finditer(text):
        word = m.group(0)
        if word in _IGNORED_IDENTIFIERS or _KNOWN_LEXICON.found(word):
            continue
        atoms.add(f"code:{word.lower()}")
    return frozenset(atoms)


def _first_verbs(low: str) -> list[str]:
    hits = sorted(
        (m.start(), v)
        for v in _ACTION_LEXICON.found(low)
        for m in [_COMPILED_ACTIONS[v].search(low)]
    )
    return [v for _, v in hits[:2]]


def _atom_key(atom: str) -> str:
    return atom.partition(":")[0]


def _action_verb(atom: str) -> str:
    return atom.partition(":")[2].rpartition(".")[2]


# How much a disagreement on each key counts. An error class or status code is the
# failure itself; a tool or action names where it happened; a verbatim identifier is
# exact but rare.
_KEY_WEIGHT = {
    "error": 3.0,
    "status": 3.0,
    "code": 2.0,
    "exit": 2.0,
    "action": 1.5,
    "tool": 1.0,
    "state": 2.0,
}
# Keys whose disjoint values are a conflict (two different failures), not just detail.
_CONFLICT_KEYS = {"error", "status", "code", "exit", "action", "tool", "state"}
_STATE_OPPOSITES = {
    frozenset(pair)
    for pair in [
        ("behind", "ahead"),
        ("intended", "unintended"),
        ("production", "staging"),
        ("production", "local"),
        ("staging", "local"),
        ("windows", "macos"),
        ("windows", "linux"),
        ("macos", "linux"),
    ]
}
# "fails" against "passes" only counts when one side says only one and the other only
# the other ("tests pass alone but fail together" says both).
_EXCLUSIVE_STATES = [("failing", "passing")]
_POLARITY_STATES = frozenset({"failing", "passing"})


def signature_agreement(
    expected_atoms: Iterable[str], extracted_atoms: Iterable[str]
) -> tuple[float, list[str]]:
    """Agreement in [0, 1] of two atom sets, key by key, and the conflicts found.

    Per key present on both sides: equal sets 1.0; one inside the other 0.8 (one side
    says more); overlapping with extras on both sides 0.35; disjoint 0.0 (a conflict).
    A key present on one side only is "not said" and counts 0.6, so a rewording that
    leaves out the tool is not punished like a wrong error class. No atoms at all: 0.5.
    """
    exp, ext = set(expected_atoms), set(extracted_atoms)
    by_key_exp: dict[str, set[str]] = {}
    by_key_ext: dict[str, set[str]] = {}
    for atom in exp:
        by_key_exp.setdefault(_atom_key(atom), set()).add(_comparable(atom))
    for atom in ext:
        by_key_ext.setdefault(_atom_key(atom), set()).add(_comparable(atom))

    total = weight_sum = 0.0
    conflicts: list[str] = []
    for key in sorted(set(by_key_exp) | set(by_key_ext)):
        weight = _KEY_WEIGHT.get(key, 1.0)
        a, b = by_key_exp.get(key), by_key_ext.get(key)
        if not a or not b:
            score = 0.6
        elif a == b:
            score = 1.0
        elif a <= b or b <= a:
            score = 0.8
        elif a & b:
            score = 0.35
        else:
            score = 0.0
        if key in {"tool", "action"} and score == 0.0:
            # Tools co-occur (git over ssh) and loose verbs are noisy ("cannot build the
            # dependency graph" for "npm install fails"): a mismatch lowers the agreement;
            # only two different subcommands of the same tool conflict outright.
            score = 0.2
            if key == "action" and _qualified(exp) and _qualified(ext):
                score = 0.0
        if key == "state" and a and b:
            opposite = any(frozenset({x, y}) in _STATE_OPPOSITES for x in a for y in b) or any(
                (x in a and y not in a and y in b and x not in b)
                or (y in a and x not in a and x in b and y not in b)
                for x, y in _EXCLUSIVE_STATES
            )
            score = 0.0 if opposite else max(score, 0.6)
        if key == "state" and score > 0.0 and not ((a or set()) | (b or set())) - _POLARITY_STATES:
            # Nearly every trigger "fails": that says nothing unless the other side passes.
            continue
        if score == 0.0 and key in _CONFLICT_KEYS:
            conflicts.append(f"{key}: {', '.join(sorted(a))} vs {', '.join(sorted(b))}")
        if key == "error" and a and b and score == 0.35:
            conflicts.append(f"{key}: {', '.join(sorted(a - b))} vs {', '.join(sorted(b - a))}")
        total += weight * score
        weight_sum += weight
    if weight_sum == 0:
        return 0.5, []
    return total / weight_sum, conflicts


def _qualified(atoms: set[str]) -> bool:
    return any(a.startswith("action:") and "." in a for a in atoms)


def _comparable(atom: str) -> str:
    # `action:git.push` and a bare `action:push` name the same action; the tool is
    # compared on its own key.
    return _action_verb(atom) if _atom_key(atom) == "action" else atom.partition(":")[2]


# ---------------------------------------------------------------------------
# Directive stance

_NEGATION = r"(?:never|not|don't|do not|avoid|without|instead of|rather than|no longer|stop)"
# Each stance is a family of ways to say one approach. Two directives that take opposite
# stances on the same family give opposite advice, whatever words they share.
_STANCES: dict[str, str] = {
    "retry_now": (
        r"retr(?:y|ies|ying)\b(?:\s+[a-z-]+){0,3}?\s+(?:immediately|right away|at once|straight away"
        r"|in a (?:tight )?loop|continuously|until it)|(?:immediately|instantly) retry|tight loop"
        r"|hammer|parallel retries|keep retrying"
    ),
    "backoff": (
        r"back ?(?:s )?off|\bwait(?:s|ing)?\b|\bdelay\b|\bsleep\b|\bpause\b|slow down|throttl|"
        r"retry-after|jitter|come back"
    ),
    "force": (
        r"--force\b(?!-with-lease)|\bforce[- ]?push|push (?:with )?--?f\b|overwrite the remote|"
        r"\bforce (?:the )?(?:push|checkout|delete|overwrite|reinstall|merge)"
    ),
    "bypass": (
        r"--no-verify|\bskip(?:s|ping)?\b|-dskiptests|verify=false|disable (?:certificate|ssl|tls|web "
        r"security)|\b(?:disabl\w*|turn(?:ing)? off|remov\w*) (?:the |a |an |its |all |that |this )?"
        r"(?:[\w-]+ )?(?:checks?|verification|validation|tests?|lint(?:er|ing)?|hooks?|guards?|"
        r"probes?|health ?checks?)\b|stricthostkeychecking no|--legacy-peer-deps|--break-system-packages|\bignor(?:e|ing)"
        r"|lower the (?:coverage )?threshold|delete the (?:failing )?assert|merge anyway|rerun on "
        r"failure|hard-?cod|without asking|force-unlock|\bmask\b|accept the output|fix it later|"
        r"--no-cache|during peak|every branch|rename the file|for another platform|commit the node_modules"
    ),
    "destroy": (
        r"\brm -rf\b|\bdelete\b|\bdrop\b|\bdiscard\b|\bwipe\b|\bflush\b|\bpurge\b|reset --hard|"
        r"\btruncate\b|\bremov(?:e|ing)\b|\brm\b|delete the namespace"
    ),
    "increase": (
        r"\braise\b|\bincrease\b|\bbump\b|\benlarge\b|\blarger\b|\bhigher\b|\blonger\b|\bmore\b|\bgrow\b"
    ),
    "decrease": r"\blower\b|\breduce\b|\bdecrease\b|\bshrink\b|\bsmaller\b|\bfewer\b|\bless\b",
    "enable": r"\benabl(?:e|ing)\b|\bturn(?:ing)? on\b|\ballow\b",
    "disable": r"\bdisabl(?:e|ing)\b|\bturn(?:ing)? off\b|\bdeny\b|\bblock\b",
    "rollback": (
        r"roll ?back|\broll(?:ed|ing)? (?:it|them|this|that|the \w+) back\b|\bundo\b|\brevert\b"
        r"|\babort\b|\bgive up\b"
    ),
    "rebase": r"\brebase\b",
    "merge": r"\bmerge\b",
    "new_key": r"(?:new|fresh|different) idempotency key",
}
_STANCE_LEXICON = _Lexicon(_STANCES)
# A negation reaches a few words on, never past the end of its clause: in "do not rebase;
# merge the changes" the merge is not negated.
_NEGATED = {
    k: re.compile(
        _NEGATION + r"[^a-z0-9_;,.:!?]+(?:[a-z0-9_']+[^a-z0-9_;,.:!?]+){0,3}?(?:" + v + r")"
    )
    for k, v in _STANCES.items()
}
_OPPOSED = [
    ("retry_now", "backoff"),
    ("increase", "decrease"),
    ("enable", "disable"),
    ("rebase", "merge"),
]
# Stances that change what a rule *is* when one side has them and the other does not:
# a directive that bypasses a check, force-pushes or retries at once is not a rewording
# of one that doesn't. Hard: the rule is different. Soft: lowers the directive's score
# (deleting or disabling also appears in honest rewordings: "remove the stale swap file").
_ASYMMETRIC_HARD = ("bypass", "force", "retry_now", "rollback", "new_key")
_ASYMMETRIC_SOFT = ("destroy", "disable")


# What a directive tells the agent to do, by its verbs: a thesaurus of the imperative
# verbs rules use, grouped by the act they name. Two directives whose verbs share no
# group ("stash the changes" against "discard the changes") do different things, however
# many nouns they share.
_VERB_CLASSES: dict[str, str] = {
    "retry": r"retr(?:y|ies|ying)|re-?run|run (?:it |them )?again|try again|repeat|resend|re-?send|redrive|replay|re-?try",
    "wait": r"wait|sleep|pause|back ?off|delay|hold off|let \w+ (?:finish|complete)|poll",
    "check": (
        r"check|verify|confirm|inspect|look (?:at|up|for)|read|examine|review|make sure|ensure|"
        r"see|find|search|locate|grep|investigate|validate|compare|test"
    ),
    "add": r"add|install|create|make (?:a|an|new)|generate|put|attach|register|grant|define|set up|provision|include",
    "remove": r"remove|delete|drop|discard|uninstall|clean|clear|purge|wipe|prune|free|strip|unset|revoke",
    "increase": r"raise|increase|bump|enlarge|grow|extend|give (?:it |them )?(?:more|a (?:bigger|larger))|scale up|allow (?:a )?(?:larger|bigger|more)",
    "decrease": r"lower|reduce|decrease|shrink|cap|limit|scale down|throttle|slow down|loosen|relax",
    "change": r"change|update|upgrade|switch|replace|rewrite|convert|move|rename|migrate|port|refactor|align|fix|edit|correct",
    "configure": r"configure|set|point|pin|select|use|enable|turn on|pass|specify|declare",
    "restart": r"restart|reload|reboot|redeploy|roll ?out|recreate|rebuild|reinstall|refresh|renew|reconnect",
    "stop": r"stop|abort|cancel|kill|disable|turn off|mask|skip|ignore|give up",
    "ask": r"ask|request|prompt|notify|tell|report|escalate|open (?:a|an) (?:pull request|issue|ticket)",
    "save": r"stash|save|back up|commit|persist|keep|store|snapshot|record|log|track",
    "restore": r"restore|recover|roll ?back|revert|undo|reset|pop",
    "isolate": r"isolate|mock|stub|fake|freeze|sandbox|separate|split|chunk|batch|stream",
    "merge": r"merge|rebase|integrate|pull|fetch|sync",
    "send": r"push|publish|upload|deploy|release|send|return|respond|acknowledge",
    "expose": r"map|expose|publish|forward|bind|open (?:the |a )?port",
}
_VERB_LEXICON = _Lexicon({k: rf"\b(?:{v})\b" for k, v in _VERB_CLASSES.items()})


def directive_stances(text: str) -> set[str]:
    """Stances a directive takes; a negated one reads `no_<stance>` ("never force push")."""
    return set(_directive_stances(text))


@lru_cache(maxsize=8192)
def _directive_stances(text: str) -> frozenset[str]:
    low = text.lower()
    return frozenset(
        f"no_{name}" if _NEGATED[name].search(low) else name for name in _STANCE_LEXICON.found(low)
    )


def stance_conflicts(expected: str, extracted: str) -> list[str]:
    """Reasons the two directives give different advice ([] when none is seen)."""
    return _stance_findings(expected, extracted)[0]


def _stance_findings(expected: str, extracted: str) -> tuple[list[str], list[str]]:
    """(hard conflicts, soft doubts) between two directives."""
    a, b = _directive_stances(expected), _directive_stances(extracted)
    hard: list[str] = []
    soft: list[str] = []
    for x, y in _OPPOSED:
        # One side takes x and not y, the other y and not x: "raise" vs "lower", but not
        # "give it more memory or reduce its footprint" (both) against "raise the limit".
        if (x in a and y not in a and y in b and x not in b) or (
            y in a and x not in a and x in b and y not in b
        ):
            hard.append(f"{x.replace('_', ' ')} vs {y.replace('_', ' ')}")
    for name in (*_ASYMMETRIC_HARD, *_ASYMMETRIC_SOFT):
        label = name.replace("_", " ")
        if (name in a and f"no_{name}" in b) or (f"no_{name}" in a and name in b):
            hard.append(f"{label} vs never {label}")
        elif (name in a) != (name in b) and f"no_{name}" not in a | b:
            side = "extracted" if name in b else "expected"
            (hard if name in _ASYMMETRIC_HARD else soft).append(
                f"only the {side} rule says {label}"
            )
    swapped = (
        _preference_swapped(expected, extracted)
        or _order_swapped(expected, extracted)
        or _steps_reversed(expected, extracted)
    )
    if swapped:
        hard.append(swapped)
    if _negation_only_difference(expected, extracted):
        hard.append("one side negates the other")
    flipped = _settings_flipped(expected, extracted)
    if flipped:
        hard.append(flipped)
    for label, pattern in _DETAIL_PATTERNS.items():
        da, db = set(pattern.findall(expected.lower())), set(pattern.findall(extracted.lower()))
        if da and db and not da & db:
            soft.append(f"different {label}: {', '.join(sorted(da))} vs {', '.join(sorted(db))}")
    va, vb = _verb_classes(expected), _verb_classes(extracted)
    if va and vb and not va & vb:
        soft.append(f"different acts: {', '.join(sorted(va))} vs {', '.join(sorted(vb))}")
    ta, tb = _tools_named(expected), _tools_named(extracted)
    if ta and tb and not ta & tb:
        soft.append(f"different tools: {', '.join(sorted(ta))} vs {', '.join(sorted(tb))}")
    return hard, soft


@lru_cache(maxsize=8192)
def _tools_named(text: str) -> frozenset[str]:
    return frozenset(_TOOL_LEXICON.found(text))


@lru_cache(maxsize=8192)
def _verb_classes(text: str) -> frozenset[str]:
    return frozenset(_VERB_LEXICON.found(text))


# Details a directive states exactly: two different ones are probably two different rules.
_DETAIL_PATTERNS = {
    "numbers": re.compile(r"(?<![\w.-])(\d+(?:\.\d+)?)(?![\w.])"),
    "flags": re.compile(r"(?<![\w-])(--?[a-z][\w-]*)"),
}
_QUOTED = re.compile(r"'([^']{3,})'|\"([^\"]{3,})\"")


def _other_message_quoted(expected: str, extracted: str) -> str | None:
    """Both triggers quote the message they fire on, and the messages share next to no
    words: "'Multiple head revisions are present'" is not "'Can't locate revision'"."""
    a = [x or y for x, y in _QUOTED.findall(expected)]
    b = [x or y for x, y in _QUOTED.findall(extracted)]
    if not a or not b:
        return None
    words_a, words_b = _stems(" ".join(a)), _stems(" ".join(b))
    if _overlap(words_a, words_b) < _QUOTED_MIN_OVERLAP:
        return f"another message: {a[0]!r} vs {b[0]!r}"
    return None


# Share of stems two quoted messages must have in common to be read as the same message.
_QUOTED_MIN_OVERLAP = 0.25


_SETTING = re.compile(r"([a-z_][\w.-]*)\s*[=:]\s*(true|false|yes|no|on|off)\b")
_TRUTH = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}


def _settings_flipped(expected: str, extracted: str) -> str | None:
    """ "set acks_late=True" against "set acks_late=False": the same switch, the other way."""
    a = {k: _TRUTH[v] for k, v in _SETTING.findall(expected.lower())}
    b = {k: _TRUTH[v] for k, v in _SETTING.findall(extracted.lower())}
    flipped = sorted(k for k in a.keys() & b.keys() if a[k] != b[k])
    return f"{', '.join(flipped)} set the other way" if flipped else None


_NEGATIONS = frozenset({"not", "no", "never", "don't", "dont", "n't", "without", "cannot", "can't"})


def _negation_only_difference(expected: str, extracted: str) -> bool:
    """ "when the service is running" against "when the service is not running"."""
    gone, came = _residual(expected, extracted)
    words = [w.lower() for w in (gone + " " + came).split()]
    return bool(words) and all(w.strip(".,;:!?") in _NEGATIONS for w in words)


_PREFERENCE_CUE = re.compile(r"instead of|rather than|in place of", re.I)
_PREFERENCE = re.compile(r"(.+?)\s+(?:instead of|rather than|in place of)\s+(.+)", re.I)


def _preference_swapped(expected: str, extracted: str) -> str | None:
    """ "use IS NULL instead of = NULL" against "use = NULL instead of IS NULL"."""
    if not (_PREFERENCE_CUE.search(expected) and _PREFERENCE_CUE.search(extracted)):
        return None  # cheap test first: the lazy pattern below backtracks over the text
    ma, mb = _PREFERENCE.search(expected), _PREFERENCE.search(extracted)
    if not ma or not mb:
        return None
    keep_a, drop_a = _option(ma.group(1)), _option(ma.group(2))
    keep_b, drop_b = _option(mb.group(1)), _option(mb.group(2))
    if _overlap(drop_a, keep_b) > _overlap(drop_a, drop_b) and _overlap(keep_a, drop_b) > _overlap(
        keep_a, keep_b
    ):
        return "the preferred and the rejected option are swapped"
    return None


_AVOID_CUE = re.compile(
    r"\b(?:instead|rather|not|no|never|don'?t|do not|avoid|without|skip|stop|replac\w*|"
    r"get rid of|swap out)\b|n't\b",
    re.I,
)


def _rejected_alternative(expected: str, extracted: str, embedder) -> str | None:
    """ "chmod +x instead of running it as root" against "run the script with sudo": one
    rule does what the other rules out. Read from whichever side names a rejected option,
    when the other side names none, avoids nothing, and reads closer to the rejected option
    than to the preferred one."""
    for rule, other, side in (
        (expected, extracted, "extracted"),
        (extracted, expected, "expected"),
    ):
        if not _PREFERENCE_CUE.search(rule) or _AVOID_CUE.search(other):
            continue
        found = _PREFERENCE.search(rule)
        if not found:
            continue
        keep, drop = found.group(1), found.group(2)
        vectors = embedder.encode([keep, drop, other])
        to_keep, to_drop = float(vectors[2] @ vectors[0]), float(vectors[2] @ vectors[1])
        if to_drop - to_keep > _REJECTED_MARGIN:
            return f"the {side} rule does what the other rules out ({drop.strip()})"
    return None


_NEGATED_PHRASE = re.compile(
    r"\b(?:never|not|don'?t|do not|avoid|without|no longer|instead of|rather than)\s+([^;,.:!?]+)",
    re.I,
)


def _forbidden_done(expected: str, extracted: str) -> str | None:
    """ "deduplicate by event ID" against "do not deduplicate; process every delivery": one
    rule does what the other forbids. The forbidden act is the first content words after
    the negation (two at most: "do not retry immediately" forbids retrying immediately,
    not retrying); the other rule does it when it has them all outside its own negations."""
    for rule, other, side in (
        (expected, extracted, "extracted"),
        (extracted, expected, "expected"),
    ):
        other_done = _stems(_NEGATED_PHRASE.sub(" ", other.lower()))
        for found in _NEGATED_PHRASE.finditer(rule.lower()):
            act = [_stem(w) for w in _tokens(found.group(1)) if w not in _STOP][:2]
            if act and all(w in other_done for w in act):
                return f"the {side} rule does what the other forbids ({' '.join(act)})"
    return None


def _stems(text: str) -> frozenset[str]:
    return frozenset(_stem(w) for w in _tokens(text) if w not in _STOP)


# How much closer to the rejected option than to the preferred one a directive must read
# to be taken as doing what the other rule rules out.
_REJECTED_MARGIN = 0.05


# A flag is one token ("--extra-index-url" is not "--index-url" plus "extra").
_OPTION_TOKEN = re.compile(r"(?<![\w-])--?[a-z][\w-]*|[a-z0-9_]+|[^\sa-z0-9_]+")
_OPTION_STOP = frozenset({"use", "the", "a", "an", "to", "with", "and", "then"})


def _option(text: str) -> set[str]:
    # Symbols count here: "IS NULL" against "= NULL" differ by one of them.
    return {t for t in _OPTION_TOKEN.findall(text.lower()) if t not in _OPTION_STOP}


_SEQUENCE_CUE = re.compile(r"\b(?:first|then|before|after|afterwards|later|until)\b", re.I)


def _order_swapped(expected: str, extracted: str) -> str | None:
    """ "deploy the code first and drop the column later" against the reverse order."""
    if not (_SEQUENCE_CUE.search(expected) and _SEQUENCE_CUE.search(extracted)):
        return None
    seq_a, seq_b = _verb_sequence(expected), _verb_sequence(extracted)
    common = [v for v in seq_a if v in seq_b]
    if len(common) < 2:
        return None
    order_b = sorted(common, key=seq_b.index)
    if common != order_b:
        return f"the steps come in the opposite order ({' then '.join(common)})"
    return None


_LEADING_TIME = re.compile(r"^\s*(before|after)\s+([^,]+),\s*(.+)$")
_TRAILING_TIME = re.compile(r"^(.+?)\s+(before|after)\s+(.+)$")
_STEP_SPLIT = re.compile(r"\s*(?:;|,|\band then\b|\bthen\b|\band\b)\s*")


def _steps(text: str) -> list[str]:
    """The acts of a directive in the order it wants them done, each read as the stem of
    its step's first content word: "verify the signature before processing the event" and
    "after verifying the signature, process it" both give verify, process."""
    low = text.lower()
    lead = _LEADING_TIME.match(low)
    trail = None if lead else _TRAILING_TIME.match(low)
    if lead:
        kind, sub, main = lead.groups()
        parts = [main, sub] if kind == "before" else [sub, main]
    elif trail:
        main, kind, sub = trail.groups()
        parts = [main, sub] if kind == "before" else [sub, main]
    else:
        parts = [low]
    heads: list[str] = []
    for part in parts:
        for step in _STEP_SPLIT.split(part):
            words = [w for w in _tokens(step) if w not in _STOP and w not in _STEP_WORDS]
            if words and _stem(words[0]) not in heads:
                heads.append(_stem(words[0]))
    return heads


# Words that place a step in time rather than name it.
_STEP_WORDS = frozenset(["first", "afterwards", "later", "next", "finally", "only", "also"])


def _steps_reversed(expected: str, extracted: str) -> str | None:
    """ "verify the signature before processing" against "process first, verify afterwards"."""
    if not (_SEQUENCE_CUE.search(expected) or _SEQUENCE_CUE.search(extracted)):
        return None
    a, b = _steps(expected), _steps(extracted)
    # Where each of the expected rule's acts comes in the extracted one ("proces" is
    # "process": the stems are crude, so a shared start of four letters will do).
    at = {h: next((i for i, k in enumerate(b) if _same_stem(h, k)), None) for h in a}
    common = [h for h in a if at[h] is not None]
    if len(common) >= 2 and common != sorted(common, key=at.__getitem__):
        return f"the steps come in the opposite order ({' then '.join(common)})"
    return None


def _same_stem(a: str, b: str) -> bool:
    """The crude stems of one word: equal, or one starts the other (four letters at least)."""
    return a == b or (min(len(a), len(b)) >= 4 and (a.startswith(b) or b.startswith(a)))


def _verb_sequence(text: str) -> list[str]:
    text = text.lower()
    hits = sorted(
        (m.start(), v)
        for v in _ACTION_LEXICON.found(text)
        for m in _COMPILED_ACTIONS[v].finditer(text)
    )
    seen: list[str] = []
    for _, verb in hits:
        if verb not in seen:
            seen.append(verb)
    # "before"/"after" reorder their clause: "pull before pushing" is pull, push;
    # "push after pulling" is pull, push as well.
    if re.search(r"\bafter\b", text) and len(seen) == 2:
        first_clause = re.split(r"\bafter\b", text)[0]
        if any(rx.search(first_clause) for rx in [_COMPILED_ACTIONS[seen[0]]]):
            seen.reverse()
    return seen


_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "to",
        "of",
        "in",
        "on",
        "at",
        "for",
        "with",
        "and",
        "or",
        "it",
        "its",
        "is",
        "are",
        "be",
        "by",
        "from",
        "as",
        "this",
        "that",
        "use",
        "using",
    ]
)
# Words that open or link a condition: "if" for "when" swaps no key term.
_CONNECTIVES = frozenset(
    ["when", "whenever", "if", "once", "while", "because", "since", "as", "so", "then"]
)


@lru_cache(maxsize=16384)
def _content(text: str) -> frozenset[str]:
    return frozenset(t for t in _tokens(text) if t not in _STOP)


def _overlap(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


# ---------------------------------------------------------------------------
# Semantic score

# Static-embedding cosines are compressed: unrelated rule texts sit near 0.25 and true
# rewordings near 0.75 on comparison/data/extraction_eval.jsonl (dev split). This maps
# that band onto [0, 1] so the score reads as a probability-like number.
_COS_FLOOR, _COS_CEIL = 0.15, 0.70


def _calibrate(cos: float) -> float:
    return min(1.0, max(0.0, (cos - _COS_FLOOR) / (_COS_CEIL - _COS_FLOOR)))


@lru_cache(maxsize=8192)
def _residual(expected: str, extracted: str) -> tuple[str, str]:
    """The words each side has that the other lacks, in order."""
    ops = _word_diff(expected, extracted)
    return (
        " ".join(w for op, w in ops if op == "delete"),
        " ".join(w for op, w in ops if op == "insert"),
    )


def _field_texts(expected: str, extracted: str) -> list[str]:
    gone, came = _residual(expected, extracted)
    return [expected, extracted, gone, came]


def _field_semantic(vectors, expected: str, extracted: str) -> tuple[float, float]:
    """(field similarity in [0, 1], share of the content words that differ).

    The similarity is read mostly from the words the two texts do not share: there a
    same-words-other-meaning pair shows its difference ("non-fast-forward" against
    "authentication denied") and a rewording, whose differing words are most of the
    text, still means the same. The whole-text similarity alone ranks those backwards
    (shared words make it high). Nothing differing but stop words is 1.0; words added
    or dropped on one side only are judged by the whole text.
    """
    e_full, x_full, e_res, x_res = vectors
    if not expected.strip() and not extracted.strip():
        return 1.0, 0.0
    whole = _calibrate(float(e_full @ x_full))
    gone, came = _residual(expected, extracted)
    gone_content, came_content = _content(gone), _content(came)
    all_content = _content(expected) | _content(extracted)
    changed = len(gone_content | came_content) / len(all_content) if all_content else 0.0
    if not gone_content and not came_content:
        residual = 1.0
    elif gone_content and came_content and e_res.any() and x_res.any():
        residual = _calibrate(float(e_res @ x_res))
    else:
        residual = whole
    return _RESIDUAL_WEIGHT * residual + (1 - _RESIDUAL_WEIGHT) * whole, changed


_RESIDUAL_WEIGHT = 0.8


def _norm_text(text: str) -> str:
    return " ".join(_tokens(text))


# ---------------------------------------------------------------------------
# The comparison

FIELDS = ("trigger", "directive")

# Verdict thresholds on the combined score (semantic and signature, never token-F1),
# set on the dev split of comparison/data/extraction_eval.jsonl and checked on its held-out
# split; bench/bench_extraction.py prints both.
MATCH_AT = 0.32
PARTIAL_AT = 0.26
# A trigger whose atoms conflict, or a directive that gives the opposite advice, is a
# different rule however close the words: the score is scaled below PARTIAL_AT.
_CONFLICT_SCALE = 0.25


def compare_rules(
    extracted: dict, expected: dict, *, extracted_signature: list[str] | None = None
) -> dict:
    """Score one extracted rule against its expected rule (SPEC §12).

    `extracted` and `expected` are `{"trigger": str, "directive": str}`; the optional
    `extracted_signature` is the candidate's own atom list (SPEC §1), compared with the
    atoms read from the expected trigger. Returns a JSON-serialisable dict; the verdict
    comes from the semantic and signature scores, never from token-F1 alone.
    """
    return compare_many([(extracted, expected)], signatures=[extracted_signature])[0]


def compare_many(
    pairs: list[tuple[dict, dict]], *, signatures: list[list[str] | None] | None = None
) -> list[dict]:
    """`compare_rules` over many `(extracted, expected)` pairs, embedding in one batch."""
    from comparison.semantic import load_embedder

    embedder = load_embedder()
    signatures = signatures if signatures is not None else [None] * len(pairs)
    if len(signatures) != len(pairs):
        raise ValueError("signatures must have one entry per pair")

    texts: list[str] = []
    for extracted, expected in pairs:
        for field in FIELDS:
            texts.extend(_field_texts(_text(expected, field), _text(extracted, field)))
    vectors = embedder.encode(texts)
    per_pair = 4 * len(FIELDS)
    return [
        _compare_one(
            extracted, expected, signature, vectors[i * per_pair : (i + 1) * per_pair], embedder
        )
        for i, ((extracted, expected), signature) in enumerate(zip(pairs, signatures, strict=True))
    ]


def _text(rule: dict, field: str) -> str:
    value = rule.get(field) if isinstance(rule, dict) else None
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"rule {field} must be a string, got {type(value).__name__}")
    return value


def _compare_one(
    extracted: dict, expected: dict, signature: list[str] | None, vectors, embedder
) -> dict:
    fields: dict[str, dict] = {}
    semantic: dict[str, float] = {}
    changed: dict[str, float] = {}
    for n, field in enumerate(FIELDS):
        exp, ext = _text(expected, field), _text(extracted, field)
        blend, changed[field] = _field_semantic(vectors[4 * n : 4 * n + 4], exp, ext)
        semantic[field] = blend
        fields[field] = {
            "token_f1": round(token_f1(exp, ext), 4),
            "semantic": round(blend, 4),
            "diff": [list(op) for op in word_diff(exp, ext)],
        }

    exp_trigger, ext_trigger = _text(expected, "trigger"), _text(extracted, "trigger")
    expected_atoms = _trigger_atoms(exp_trigger)
    agreement, atom_conflicts = signature_agreement(expected_atoms, _trigger_atoms(ext_trigger))
    declared = _declared_atoms(signature or [])
    if declared:
        # The candidate's own signature is what the matcher will fire on (SPEC §11): it
        # must agree with the expected trigger as much as the extracted prose does.
        declared_agreement, declared_conflicts = signature_agreement(expected_atoms, declared)
        agreement = (agreement + declared_agreement) / 2
        atom_conflicts += [c for c in declared_conflicts if c not in atom_conflicts]
    if _negation_only_difference(exp_trigger, ext_trigger):
        atom_conflicts.append("one side negates the other")
    quoted = _other_message_quoted(exp_trigger, ext_trigger)
    if quoted and not atom_conflicts:
        atom_conflicts.append(quoted)
    exp_directive, ext_directive = _text(expected, "directive"), _text(extracted, "directive")
    hard, soft = _stance_findings(exp_directive, ext_directive)
    rejected = _forbidden_done(exp_directive, ext_directive) or _rejected_alternative(
        exp_directive, ext_directive, embedder
    )
    if rejected and not hard:
        hard.append(rejected)
    for field, found in (("trigger", atom_conflicts), ("directive", hard)):
        swap = _key_term_swapped(_text(expected, field), _text(extracted, field), embedder)
        if swap and not found:
            found.append(swap)
    conflicts = [f"trigger {c}" for c in atom_conflicts] + [f"directive {c}" for c in hard]
    score = _score(
        semantic["trigger"],
        semantic["directive"],
        agreement,
        trigger_changed=changed["trigger"],
        directive_changed=changed["directive"],
        doubts=len(soft),
        conflict=bool(conflicts),
    )
    verdict = "match" if score >= MATCH_AT else "partial" if score >= PARTIAL_AT else "miss"
    sem = (semantic["trigger"] + semantic["directive"]) / 2
    return {
        "trigger": fields["trigger"],
        "directive": fields["directive"],
        "token_f1": round((fields["trigger"]["token_f1"] + fields["directive"]["token_f1"]) / 2, 4),
        "semantic": round(sem, 4),
        "signature_agreement": round(agreement, 4),
        "score": round(score, 4),
        "conflicts": conflicts,
        "doubts": [f"directive {d}" for d in soft],
        "verdict": verdict,
        "why": _why(verdict, conflicts, sem, agreement),
    }


def _score(
    trigger_sem: float,
    directive_sem: float,
    agreement: float,
    *,
    trigger_changed: float,
    directive_changed: float,
    doubts: int,
    conflict: bool,
) -> float:
    """The number the verdict is read from; token-F1 has no part in it (SPEC §12).

    The trigger is judged by its meaning and its atoms together. How much the atoms
    count grows with how much of the trigger was reworded: a wholesale rewording
    ("rate limited" for "429 Too Many Requests") is where embeddings are least sure and
    atoms most telling, while a one-word change ("not running" for "not migrated")
    is decided by the meaning of that word, about which matching atoms elsewhere in the
    sentence say nothing. The directive is judged by its meaning, lowered by each soft
    doubt; a rule is only as right as its weaker half.
    """
    atom_weight = _ATOM_WEIGHT * trigger_changed
    trigger = (1 - atom_weight) * trigger_sem + atom_weight * agreement
    directive = directive_sem * (_DOUBT_FACTOR**doubts)
    # A field copied word for word proves nothing about the other one (a wrong extraction
    # often keeps the trigger and changes the advice): fields weigh by how much they changed.
    weight_t, weight_d = max(trigger_changed, 0.1), max(directive_changed, 0.1)
    mean = (weight_t * trigger + weight_d * directive) / (weight_t + weight_d)
    score = (1 - _MIN_WEIGHT) * mean + _MIN_WEIGHT * min(trigger, directive)
    # A conflict sends the pair below every unconflicted one, keeping its order.
    return score * _CONFLICT_SCALE if conflict else score


_ATOM_WEIGHT = 0.6
_DOUBT_FACTOR = 0.6
_MIN_WEIGHT = 0.5


def _change_blocks(expected: str, extracted: str) -> list[tuple[str, str]]:
    """Runs of words that differ, as (expected words, extracted words)."""
    blocks: list[tuple[list[str], list[str]]] = []
    previous = "keep"
    for op, word in _word_diff(expected, extracted):
        if op == "keep":
            previous = op
            continue
        if previous == "keep":
            blocks.append(([], []))
        blocks[-1][0 if op == "delete" else 1].append(word)
        previous = op
    return [(" ".join(gone), " ".join(came)) for gone, came in blocks]


def _key_term_swapped(expected: str, extracted: str, embedder) -> str | None:
    """A text kept nearly word for word with one key term swapped for an unrelated one.

    A rewording changes most of the wording; an extraction that keeps the expected
    sentence and swaps its key term ("connection refused" for "connection timed out",
    "primary" for "replica", "upload" for "download") states another rule. A swap is
    excused when the two terms are near-synonyms for the model, share a stem, or read
    as the same atoms.
    """
    if not expected.strip() or not extracted.strip():
        return None
    kept = len(_content(expected) & _content(extracted))
    total = len(_content(expected) | _content(extracted))
    if total == 0 or kept / total < _SWAP_MIN_KEPT:
        return None
    for gone, came in _change_blocks(expected, extracted):
        old, new = _content(gone) - _CONNECTIVES, _content(came) - _CONNECTIVES
        # A compound term is judged by the part that changed: "--ask-become-pass" against
        # "--ask-vault-pass" is "become" against "vault", not two flags that share "ask".
        old, new = old - new, new - old
        if not old or not new or _related(old, new):
            continue
        # The same atoms on both sides excuse the change ("with non-fast-forward" against
        # "because it is not a fast-forward") unless the words both keep give those atoms
        # on their own ("pass" in "--ask-become-pass" and "--ask-vault-pass").
        atoms = _trigger_atoms(gone)
        if (
            atoms
            and atoms == _trigger_atoms(came)
            and atoms != _trigger_atoms(_only(gone, _content(gone) - old))
        ):
            continue
        vectors = embedder.encode([_only(gone, old), _only(came, new)])
        if float(vectors[0] @ vectors[1]) < _SWAP_SYNONYM_COS:
            return f"{gone!r} replaced by {came!r}"
    return None


def _only(text: str, words: set[str]) -> str:
    """The words of `text` that are in `words`, in their order."""
    return " ".join(t for t in _tokens(text) if t in words)


def _related(old: set[str], new: set[str]) -> bool:
    """Same term in other words: a shared stem ("holding"/"holds", "config"/"configuration"),
    the same act ("verify"/"confirm"), or a stand-in pronoun ("packages"/"anything")."""
    if old <= _PRONOUNS or new <= _PRONOUNS:
        return True
    if _verb_classes(" ".join(old)) & _verb_classes(" ".join(new)):
        return True
    stems_old, stems_new = {_stem(w) for w in old}, {_stem(w) for w in new}
    return any(_same_stem(a, b) for a in stems_old for b in stems_new)


_PRONOUNS = frozenset(
    [
        "anything",
        "something",
        "everything",
        "nothing",
        "whatever",
        "whichever",
        "everyone",
        "someone",
        "one",
        "ones",
    ]
)
_SUFFIX = re.compile(r"(?:ations?|ing|ed|es|s|er|ers|ion|ions|ment|ments|ly)$")


def _stem(word: str) -> str:
    stemmed = _SUFFIX.sub("", word)
    if stemmed != word and _DOUBLED.search(stemmed):
        stemmed = stemmed[:-1]  # "running" is "run", "stopped" is "stop"
    return stemmed if len(stemmed) >= 3 else word


_DOUBLED = re.compile(r"([b-df-hj-np-rtv-z])\1$")


# Share of content words kept for a change to count as a swap rather than a rewording,
# and the cosine above which two swapped terms are taken as synonyms (dev split).
_SWAP_MIN_KEPT = 0.4
_SWAP_SYNONYM_COS = 0.8


def _declared_atoms(atoms: Iterable[str]) -> frozenset[str]:
    """A candidate's own signature, read into this module's vocabulary.

    Signatures are free-form (`error:http_429`, `error:file_not_found`, `tool:kubectl`):
    each value is read as prose, so `error:http_429` counts as `status:429` and
    `error:rate_limited`. An atom that reads as nothing known is left out rather than
    set against the prose atoms: an unknown name is not a different failure. Notice
    atoms (breach:/stall:/regression:) say which metric suffered, not what failed.
    """
    out: set[str] = set()
    for atom in atoms:
        key, _, value = atom.partition(":")
        if key in {"breach", "stall", "regression"} or not value:
            continue
        prose = re.sub(r"[_.:/-]+", " ", value)
        if key == "tool":
            out.update(f"tool:{t}" for t in _TOOL_LEXICON.found(prose))
        elif key == "action":
            verb = prose.split()[-1]
            known = [v for v in _ACTION_LEXICON.found(verb) if _COMPILED_ACTIONS[v].fullmatch(verb)]
            out.update(f"action:{v}" for v in known)
        else:
            out.update(
                a
                for a in _trigger_atoms(prose)
                if _atom_key(a) in {"error", "status", "exit", "code"}
            )
    return frozenset(out)


def _why(verdict: str, conflicts: list[str], sem: float, agreement: float) -> str:
    if conflicts:
        return "different rule: " + "; ".join(conflicts[:2])
    figures = f"semantic {sem:.2f}, signature {agreement:.2f}"
    if verdict == "match":
        return f"same rule ({figures})"
    if verdict == "partial":
        return f"close but not clearly the same ({figures})"
    return f"different rule ({figures})"
