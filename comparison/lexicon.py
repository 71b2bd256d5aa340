"""The vocabularies the comparator reads rules with (semantics §12).

Plain data: named regular expressions for tools, actions, error classes, trigger
qualifiers, directive stances and the acts a directive's verbs name, plus the equivalence
lexicon that rewrites jargon and ops synonyms to one spelling before anything is compared.
Patterns are written in lower case; `Lexicon` searches them behind shared gates.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .literals import Prefilter, lowered, required

# ---------------------------------------------------------------------------
# Failure-mode atoms (semantics §1: `tool:`, `action:`, `error:` and any other key)

# Tools by name. Only named tools count: "the remote rejects your push" names none,
# which is "not said", never a conflict.
TOOLS: dict[str, str] = {
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
ACTIONS: dict[str, str] = {
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
ERRORS: dict[str, str] = {
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
        r"tim(?:ed?|es|ing) ?out\b|\btimeouts?\b|time limit|deadline exceeded|never (?:returns|responds|"
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
    "too_many_open_files": r"too many open files|\bemfile\b|open file limit",
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
STATES: dict[str, str] = {
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


class Lexicon:
    """Named patterns, each searched only when the text holds a string it cannot match
    without (literals.py), on lower-cased text.

    A trigger is checked against ~150 patterns and most never match: a failed substring
    test costs a small fraction of a failed regex search. Patterns are written in lower
    case and matched without re.IGNORECASE, which costs Python's regex engine several
    times more per character; the rare case-sensitive one (git's "CONFLICT") sees the
    original text.
    """

    def __init__(self, patterns: dict[str, str], *, case_sensitive=()):
        self.case_sensitive = frozenset(case_sensitive)
        self.patterns = {name: re.compile(p) for name, p in patterns.items()}
        # A case-sensitive pattern is filtered by its strings lower-cased, as the scan
        # reads the lower-cased text, and searched in the text itself.
        self.members = [
            (name, self.patterns[name], name in self.case_sensitive) for name in patterns
        ]
        self.prefilter = Prefilter(
            [
                lowered(required(p)) if name in self.case_sensitive else required(p)
                for name, p in patterns.items()
            ]
        )

    def found(self, text: str) -> list[str]:
        """Names of the patterns that match, in declaration order."""
        low = text.lower()
        members = self.members
        out = []
        for i in self.prefilter.candidates(low):
            name, rx, exact = members[i]
            if rx.search(text if exact else low):
                out.append(name)
        return out


TOOL_LEXICON = Lexicon(TOOLS)
ACTION_LEXICON = Lexicon(ACTIONS)
ERROR_LEXICON = Lexicon(ERRORS, case_sensitive={"merge_conflict"})
STATE_LEXICON = Lexicon(STATES)
KNOWN_LEXICON = Lexicon({**ERRORS, **{f"tool:{k}": v for k, v in TOOLS.items()}})
COMPILED_TOOLS = TOOL_LEXICON.patterns
COMPILED_ACTIONS = ACTION_LEXICON.patterns
COMPILED_ERRORS = ERROR_LEXICON.patterns

# ---------------------------------------------------------------------------
# Directive stance

NEGATION = r"(?:never|not|don't|do not|avoid|without|instead of|rather than|no longer|stop)"
# Each stance is a family of ways to say one approach. Two directives that take opposite
# stances on the same family give opposite advice, whatever words they share.
STANCES: dict[str, str] = {
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
        r"--no-verify|\bskip(?:s|ping)? (?:the |a |an |all |any |its |their )?(?:[\w-]+ )?(?:tests?|"
        r"checks?|verification|validation|hooks?|ci|lint\w*|reviews?|approvals?|signing)\b|-dskiptests|verify=false|disable (?:certificate|ssl|tls|web "
        r"security)|\bbypass\w*|\b(?:disabl\w*|turn(?:ing)? off|remov\w*) (?:the |a |an |its |all |that |this )?"
        r"(?:[\w-]+ )?(?:checks?|verification|validation|tests?|lint(?:er|ing)?|hooks?|guards?|"
        r"probes?|health ?checks?)\b|stricthostkeychecking no|--legacy-peer-deps|--break-system-packages|\bignor(?:e|es|ing) (?:the |a |an |all |any |this |that |its |their )?(?:[\w-]+ )?(?:errors?|"
        r"warnings?|failures?|checks?|tests?|alerts?|lint\w*|exit codes?|certificates?)\b"
        r"|lower the (?:coverage )?threshold|delete the (?:failing )?assert|merge anyway|rerun on "
        r"failure|without asking|force-unlock|\bmask\b"
    ),
    "destroy": (
        r"\brm -rf\b|\bdelet(?:e|es|ing)\b|\bdrop(?:s|ping)?\b|\bdiscard(?:s|ing)?\b|\bwip(?:e|es|ing)\b|"
        r"\bflush(?:es|ing)?\b|\bpurg(?:e|es|ing)\b|reset --hard|\btruncat(?:e|es|ing)\b|"
        r"\bremov(?:e|es|ing)\b|\brm\b"
    ),
    "increase": (
        r"\braise\b|\bincrease\b|\bbump\b|\benlarge\b|\blarger\b|\bhigher\b|\blonger\b|\bmore\b|\bgrow\b"
    ),
    "decrease": r"\blower\b|\breduce\b|\bdecrease\b|\bshrink\b|\bsmaller\b|\bfewer\b|\bless\b",
    "enable": r"\benabl(?:e|ing)\b|\bturn(?:ing)? on\b|\ballow\b",
    "disable": r"\bdisabl(?:e|ing)\b|\bturn(?:ing)? off\b|\bdeny\b|\bblock\b",
    "rollback": (
        r"roll(?:ing)? ?back|\broll(?:ed|ing)? (?:it|them|this|that|the \w+) back\b|\bundo(?:ing)?\b|"
        r"\brevert(?:s|ing)?\b|\babort(?:s|ing)?\b|\bgive up\b|\b(?:return|restor)\w* (?:[\w-]+ ){0,3}"
        r"to (?:the |its |their )?(?:last|previous|prior) (?:good |working |successful |deployed )?"
        r"(?:version|revision|release|state)"
    ),
    "rebase": r"\brebase\b",
    "merge": r"\bmerge\b",
    "new_key": r"(?:new|fresh|different) idempotency key",
}
STANCE_LEXICON = Lexicon(STANCES)
# A negation reaches a few words on, never past the end of its clause: in "do not rebase;
# merge the changes" the merge is not negated. A rejected option ("rather than rewriting
# its history with rebase plus force push, …") reaches to the end of its clause.
_REJECTING = r"(?:instead of|rather than|in place of)[^;,.:!?]*?"
NEGATED = {
    k: re.compile(
        rf"(?:{NEGATION}[^a-z0-9_;,.:!?]+(?:[a-z0-9_']+[^a-z0-9_;,.:!?]+){{0,3}}?|{_REJECTING})"
        rf"(?:{v})"
    )
    for k, v in STANCES.items()
}
OPPOSED = [
    ("retry_now", "backoff"),
    ("increase", "decrease"),
    ("enable", "disable"),
    ("rebase", "merge"),
]
# Stances that change what a rule *is* when one side has them and the other does not:
# a directive that bypasses a check, force-pushes or retries at once is not a rewording
# of one that doesn't. Hard: the rule is different. Soft: lowers the directive's score
# (deleting or disabling also appears in honest rewordings: "remove the stale swap file").
ASYMMETRIC_HARD = ("bypass", "force", "retry_now", "rollback", "new_key")
ASYMMETRIC_SOFT = ("destroy", "disable")


# What a directive tells the agent to do, by its verbs: a thesaurus of the imperative
# verbs rules use, grouped by the act they name. Two directives whose verbs share no
# group ("stash the changes" against "discard the changes") do different things, however
# many nouns they share.
VERB_CLASSES: dict[str, str] = {
    "retry": r"retr(?:y|ies|ying)|re-?run|run (?:it |them )?again|try again|repeat|resend|re-?send|redrive|replay|re-?try",
    "wait": r"wait|sleep|pause|back ?off|delay|hold off|let \w+ (?:finish|complete)|poll",
    "check": (
        r"check|verify|confirm|inspect|look (?:at|up|for)|read|examine|review|make sure|ensure|"
        r"see|find|search|locate|grep|investigate|validate|compare|test"
    ),
    "add": r"add|install|create|make (?:a|an|new)|generate|put|attach|register|grant|define|set up|provision|include",
    "remove": r"remove|delete|drop|discard|uninstall|clean|clear|purge|wipe|prune|free|strip|unset|revoke",
    "increase": r"raise|increase|bump|enlarge|grow|extend|give (?:it |them )?(?:more|a (?:bigger|larger))|scale up|allow (?:a )?(?:larger|bigger|more)",
    "decrease": r"lower|reduce|decrease|halve|shrink|cap|limit|scale down|throttle|slow down|loosen|relax",
    "change": r"change|update|upgrade|switch|replace|rewrite|convert|move|rename|migrate|port|refactor|align|fix|edit|correct",
    "configure": r"configure|set|point|pin|select|use|enable|turn on|pass|specify|declare",
    "restart": (
        r"restart|reload|reboot|redeploy|roll ?out|roll(?! ?back)|recreate|rebuild|reinstall|refresh|"
        r"renew|reconnect"
    ),
    "stop": r"stop|abort|cancel|kill|disable|turn off|mask|skip|ignore|give up",
    "ask": r"ask|request|prompt|notify|tell|report|escalate|open (?:a|an) (?:pull request|issue|ticket)",
    "save": r"stash|save|back up|commit|persist|keep|store|snapshot|record|log|track",
    "restore": r"restore|recover|roll ?back|revert|undo|reset|pop",
    "isolate": r"isolate|mock|stub|fake|freeze|sandbox|separate|split|chunk|batch|stream",
    "merge": r"merge|rebase|integrate|pull|fetch|sync",
    "send": r"push|publish|upload|deploy|release|send|return|respond|acknowledge",
    "expose": r"map|expose|publish|forward|bind|open (?:the |a )?port",
}
VERB_LEXICON = Lexicon({k: rf"\b(?:{v})\b" for k, v in VERB_CLASSES.items()})


# ---------------------------------------------------------------------------
# Equivalences: one spelling for the jargon and ops synonyms that name the same thing
#
# Applied to both texts before anything is compared, so "CUDA out of memory" and "GPU ran
# out of VRAM", or "turn the flag off" and "disable the toggle", reach the atoms, the
# stances and the embedding in the same words. Only equivalences that hold in every ops
# context belong here: "throttle" (a verb: slow the client down) is not "throttled" (a
# state: the server is slowing you down), so only the latter is rate limiting.
_ARTICLE = r"(?:the|a|an|this|that|its|their|your|our)"
EQUIVALENTS: list[tuple[str, str]] = [
    # error jargon and the words people put for it
    (
        r"\b(?:cuda |gpu )?oom(?:[- ]?kill(?:ed|er|s)?)?\b|\boutofmemory(?:error)?\b|\b(?:ran|runs?|"
        r"running) out of (?:gpu |cuda |device |host )?(?:memory|vram|ram)\b|\bout of (?:gpu |cuda )?"
        r"(?:vram|ram)\b|\bmemory (?:is |was )?exhausted\b",
        "out of memory",
    ),
    (r"\bvram\b", "gpu memory"),
    (r"\bcuda\b", "gpu"),
    (r"\bemfile\b", "too many open files"),
    (
        r"\b(?:max(?:imum)? )?(?:open[- ]files?|file[- ]descriptors?|file[- ]handles?|fds?|nofile)"
        r" (?:limit|ulimit|cap)s?\b|\bulimit(?: -n)?\b",
        "open file limit",
    ),
    (r"\b(?:ran|runs?|running) out of (?:file descriptors|file handles)\b", "too many open files"),
    (
        r"\benospc\b|\bno (?:free )?(?:disk )?space(?: left)?(?: on (?:the )?device)?\b|\bdisk (?:is |"
        r"was )?full\b|\bout of disk(?: space)?\b|\b(?:ran|runs?|running) out of (?:disk )?space\b|"
        r"\b(?:volume|filesystem|file system|partition) (?:is |was )?full\b",
        "disk full",
    ),
    (
        r"\b(?:http )?429(?: too many requests)?\b",
        "429 rate limited",
    ),
    (
        r"\btoo many requests\b|\brate[- ]?limit(?:ed|ing)\b|\bthrottled\b|\bthrottling\b",
        "rate limited",
    ),
    (r"\b5xx(?: errors?| responses?| status(?:es)?)?\b|\bserver[- ]side errors?\b", "server error"),
    (r"\b4xx(?: errors?| responses?| status(?:es)?)?\b|\bclient[- ]side errors?\b", "client error"),
    (r"\bsigkill\b|\bsignal 9\b|\bkill -9\b", "killed"),
    (r"\bsigterm\b", "terminated"),
    (r"\bsigsegv\b|\bsegfault(?:s|ed)?\b", "segmentation fault"),
    (r"\benoent\b|\bfile not found\b|\bno such file(?: or directory)?\b", "no such file"),
    (r"\beacces\b|\beperm\b|\boperation not permitted\b", "permission denied"),
    (r"\betimedout\b|\btimed-out\b|\btime-?out error\b", "timed out"),
    (r"\beconnrefused\b", "connection refused"),
    (r"\beconnreset\b|\bconnection reset by peer\b", "connection reset"),
    (r"\beaddrinuse\b|\baddress already in use\b", "port in use"),
    (r"\bttls?\b|\btime[- ]to[- ]live\b|\bexpiry\b|\bexpiration(?: time)?\b|\bmax-age\b", "expiry"),
    (r"\bnullpointerexception\b|\bnpe\b|\bnull pointer\b", "null reference"),
    # abbreviations
    (r"\bk8s\b", "kubernetes"),
    (r"\bdbs\b", "databases"),
    (r"\bdb\b", "database"),
    (r"\benv vars?\b|\benvvars?\b", "environment variable"),
    (r"\bconfigs\b", "configurations"),
    (r"\bconfig\b", "configuration"),
    (r"\brepos\b", "repositories"),
    (r"\brepo\b", "repository"),
    (r"\bdeps\b", "dependencies"),
    (r"\bpkgs\b", "packages"),
    (r"\bcreds\b", "credentials"),
    (r"\bperms\b", "permissions"),
    (r"\bprs\b", "pull requests"),
    (r"\bpr\b", "pull request"),
    (r"\bdirs\b", "directories"),
    (r"\bdir\b", "directory"),
    # ops verbs and nouns said in several ways
    (r"\b(?:redact|scrub|obfuscat)(?:e|es|ed|ing|s)?\b", "redact"),
    (
        rf"\b(?:turn|switch|flip)(?:s|ed|ing)? ({_ARTICLE} )?([\w-]+(?: [\w-]+)?) off\b",
        r"disable \1\2",
    ),
    (r"\b(?:turn|switch|flip)(?:s|ed|ing)? off\b|\bdeactivat(?:e|es|ed|ing)\b", "disable"),
    (
        rf"\b(?:turn|switch|flip)(?:s|ed|ing)? ({_ARTICLE} )?([\w-]+(?: [\w-]+)?) on\b",
        r"enable \1\2",
    ),
    (r"\b(?:turn|switch|flip)(?:s|ed|ing)? on\b", "enable"),
    (r"\bfeature (?:flag|toggle|switch)(?:es|s)?\b|\btoggles?\b|\bkill[- ]switch(?:es)?\b", "flag"),
    (r"\bbounc(?:e|es|ed|ing)\b", "restart"),
    (
        r"\bre-?run(?:s|ning)?\b|\b(?:try|run) (?:it |that |this |them )?again\b|"
        r"\bre-?tr(?:y|ies|ied)\b",
        "retry",
    ),
    # "reduce the batch size by half" is "halve the batch size"
    (
        r"\b(?:reduc|cut|decreas|lower)(?:e|es|ed|ing|s|ting)? ((?:[\w-]+ ){0,3}?[\w-]+) "
        r"(?:by half|in half|by 50 ?%)",
        r"halve \1",
    ),
    (r"\bback-?off\b|\bbacking off\b", "back off"),
    (r"\bidempotent key\b", "idempotency key"),
    (r"\brather than\b|\bin place of\b", "instead of"),
    # connectives of concession that say the same thing
    (r"\b(?:even though|though)\b", "although"),
    # ways of introducing an example: "a pooler such as PgBouncer" is "a pooler like PgBouncer"
    (r"\b(?:such as|for example,?|for instance,?|e\.g\.,?|like)(?= )", "such as"),
]
_EQUIVALENT_RX = [(re.compile(p, re.I), r) for p, r in EQUIVALENTS]
# For ASCII text a case-blind pattern written in lower case matches the lower-cased text
# where it matches the text, and searching without re.IGNORECASE is several times
# faster; the filter's strings are in lower case too.
assert all(p == p.lower() for p, _ in EQUIVALENTS), "equivalences are written in lower case"
_EQUIVALENT_LOW = [re.compile(p) for p, _ in EQUIVALENTS]
_EQUIVALENT_FILTER = Prefilter([required(p, ignore_case=True) for p, _ in EQUIVALENTS])


@lru_cache(maxsize=32768)
def canonical(text: str) -> str:
    """The text with every equivalence rewritten to its one spelling."""
    if not text.isascii():
        # A case-blind match may pair a letter with a non-ASCII one ("ſ" with "s").
        for rx, replacement in _EQUIVALENT_RX:
            text = rx.sub(replacement, text)
        return text
    # The rewrites run in order and one may rewrite what an earlier one wrote, so the
    # candidates are read again from the text as it stands after each change.
    low = text.lower()
    todo = _EQUIVALENT_FILTER.candidates(low)
    k = 0
    while k < len(todo):
        n = todo[k]
        k += 1
        if not _EQUIVALENT_LOW[n].search(low):
            continue
        rx, replacement = _EQUIVALENT_RX[n]
        text = rx.sub(replacement, text)
        low = text.lower()
        todo, k = [i for i in _EQUIVALENT_FILTER.candidates(low) if i > n], 0
    return text


# Plain synonyms of rule prose: two words of one group name the same thing, so a change
# from one to the other is no change of term ("required" → "needed", "huge" → "large").
# The acts a directive's verbs name are grouped separately (VERB_CLASSES).
SYNONYMS: list[frozenset[str]] = [
    frozenset(group.split())
    for group in (
        "need needs needed require requires required necessary",
        "big large huge bigger larger",
        "small little tiny smaller",
        "fast quick quickly rapid",
        "new fresh newer",
        "old stale outdated previous",
        "failure failures fault faults error errors",
        "fail fails failed failing throw throws threw raise raises raised error errors errored "
        "crash crashes crashed break breaks broke hit hits encounter encounters encountered",
        "emit emits print prints output outputs log logs",
        "start starts begin begins launch launches",
        "stop stops halt halts",
        "show shows display displays print prints report reports",
        "get gets obtain obtains fetch fetches retrieve retrieves",
        "make makes create creates generate generates",
        "change changes modify modifies alter alters edit edits",
        "fix fixes repair repairs correct corrects resolve resolves",
        "remove removes delete deletes drop drops",
        "run runs execute executes invoke invokes",
        "check checks verify verifies confirm confirms ensure ensures validate validates",
        "send sends transmit transmits submit submits",
        "upload uploads send sends",
        "write writes save saves store stores persist persists insert inserts",
        "read reads load loads",
        "wrong incorrect invalid bad",
        "missing absent lacking",
        "slow slowly sluggish",
        "beyond past exceeding",
        "reduce reduces lower lowers decrease decreases cut cuts shrink shrinks trim trims",
        "pass passes supply supplies provide provides",
        "return returns give gives",
        "below beneath",
        "whole entire full complete",
        "every each all",
        "commit commits check-in",
        "machine host server box node",
        "app application service",
        "folder directory",
        "setting settings option options configuration configurations",
        "limit limits cap caps ceiling maximum max",
        "request requests call calls",
        "key keys token tokens credential credentials secret secrets",
        "message messages text",
        "user users account accounts",
        "id ids identifier identifiers",
    )
]
# A word may stand in more than one group ("print" emits and shows, "error" is a failure
# and what fails): each of its groups counts.
SYNONYM_OF: dict[str, frozenset[int]] = {}
for _n, _group in enumerate(SYNONYMS):
    for _word in _group:
        SYNONYM_OF[_word] = SYNONYM_OF.get(_word, frozenset()) | {_n}


# Words of opposite meaning: one replaced by the other turns a rule around ("a documented
# public API" against "an undocumented internal API"). A word and its negative prefix
# (un-, in-, non-, dis-) are opposites too.
ANTONYMS: list[tuple[str, str]] = [
    tuple(pair.split())  # type: ignore[misc]
    for pair in (
        "public private",
        "public internal",
        "external internal",
        "static dynamic",
        "before after",
        "first last",
        "all none",
        "every none",
        "local remote",
        "primary replica",
        "primary secondary",
        "read write",
        "upload download",
        "input output",
        "client server",
        "source destination",
        "start stop",
        "success failure",
        "min max",
        "minimum maximum",
        "increase decrease",
        "raise lower",
        "more fewer",
        "more less",
        "larger smaller",
        "higher lower",
        "longer shorter",
        "add remove",
        "allow deny",
        "allow block",
        "accept reject",
        "include exclude",
        "inside outside",
        "enable disable",
        "sync async",
        "synchronous asynchronous",
        "encrypt decrypt",
        "compress decompress",
        "lock unlock",
        "open close",
        "push pull",
        "import export",
        "inbound outbound",
        "ingress egress",
        "parent child",
        "parent children",
        "root user",
        "production staging",
        "dev prod",
        "global per",
        "shared dedicated",
        "once every",
    )
]
_NEGATIVE_PREFIX = ("un", "in", "non", "dis", "im", "ir", "il")
_PREFIX_SET = frozenset(_NEGATIVE_PREFIX)


def opposite(a: str, b: str) -> bool:
    """Two words of opposite meaning: a listed pair, or one is the other with a negative
    prefix ("documented" / "undocumented", "valid" / "invalid")."""
    if (a, b) in _ANTONYM_SET:
        return True
    if min(len(a), len(b)) < 4:
        return False
    # One is the other behind a negative prefix: the longer ends with the shorter and
    # what comes before it is one of the prefixes.
    longer, shorter = (a, b) if len(a) > len(b) else (b, a)
    return longer.endswith(shorter) and longer[: len(longer) - len(shorter)] in _PREFIX_SET


_ANTONYM_SET = frozenset(ANTONYMS) | frozenset((b, a) for a, b in ANTONYMS)
_ANTONYMS_OF: dict[str, set[str]] = {}
for _a, _b in _ANTONYM_SET:
    _ANTONYMS_OF.setdefault(_a, set()).add(_b)


@lru_cache(maxsize=32768)
def opposites_of(word: str) -> frozenset[str]:
    """Every word `opposite(word, w)` holds for, so that a word is tested against a set
    of words with one intersection rather than one call a pair."""
    found = set(_ANTONYMS_OF.get(word, ()))
    if len(word) >= 4:
        found.update(p + word for p in _NEGATIVE_PREFIX)
    found.update(
        word[len(p) :] for p in _NEGATIVE_PREFIX if word.startswith(p) and len(word) - len(p) >= 4
    )
    return frozenset(found)
