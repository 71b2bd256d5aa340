"""Normalised error classes (semantics §19): the same failure worded differently gets the same
`error:` atom.

Each rule is (rule name, error class, pattern). Patterns are written against what tools really
print — git, pip, npm, docker, kubectl, HTTP clients, the C library's errno messages, Python,
Node, Java and Go exception texts — and are deliberately narrow: a clean `git pull` that says
"Fast-forward" or a `git status` that says "can be fast-forwarded" must not look like a
rejected push. Texts no rule covers fall through to the template miner (`templates`).
"""

import re
from dataclasses import dataclass
from functools import cache, cached_property
from http import HTTPStatus

_I = re.IGNORECASE
_M = re.MULTILINE


@dataclass(frozen=True)
class ErrorRule:
    name: str
    error_class: str
    source: str
    flags: int

    @cached_property
    def pattern(self) -> re.Pattern:
        # Compiled by the first text read, not by every process that imports the readers
        # (`manage.py check` imports them with the API and reads nothing).
        return re.compile(self.source, self.flags)


def _rule(name: str, error_class: str, pattern: str, flags: int = _I) -> ErrorRule:
    return ErrorRule(name, error_class, pattern, flags)


# Order is irrelevant to the result (every rule runs), but it is the order explanations list.
RULES: tuple[ErrorRule, ...] = (
    # git: a push the remote refuses because it would lose remote commits.
    _rule(
        "git.non_fast_forward",
        "non_fast_forward",
        r"\bnon[- ]fast[- ]forward\b|\bnot a fast[- ]forward\b",
    ),
    _rule("git.rejected_fetch_first", "non_fast_forward", r"!\s*\[rejected\][^\n]*\(fetch first\)"),
    _rule(
        "git.tip_behind",
        "non_fast_forward",
        r"updates were rejected because the tip of your current branch is\s+behind",
    ),
    _rule(
        "git.pushed_tip_behind",
        "non_fast_forward",
        r"updates were rejected because a pushed branch tip is\s+behind",
    ),
    _rule(
        "git.remote_has_work",
        "non_fast_forward",
        r"updates were rejected because the remote contains work that you do\s+not\s+have",
    ),
    _rule("hg.new_remote_head", "non_fast_forward", r"push creates new remote head"),
    # git: a push refused by a server-side hook or branch protection (not a fast-forward issue).
    _rule("git.remote_rejected", "push_declined", r"!\s*\[remote rejected\]"),
    _rule(
        "git.protected_branch", "push_declined", r"protected branch (?:hook declined|update failed)"
    ),
    _rule("git.pre_receive_declined", "push_declined", r"pre-receive hook declined"),
    _rule(
        "git.cannot_fast_forward",
        "cannot_fast_forward",
        r"not possible to fast-forward|diverging branches can't be fast-forwarded"
        r"|need to specify how to reconcile divergent branches|you have divergent branches",
    ),
    # merges, rebases, stash pops
    _rule("git.merge_conflict", "merge_conflict", r"\bCONFLICT \([\w/ -]+\):|merge conflict in\b"),
    _rule("git.automatic_merge_failed", "merge_conflict", r"automatic merge failed"),
    _rule("git.unmerged_files", "merge_conflict", r"you have unmerged (?:files|paths)"),
    _rule("git.resolve_conflicts", "merge_conflict", r"resolve all conflicts manually"),
    _rule("git.could_not_apply", "merge_conflict", r"error: could not apply [0-9a-f]{6,}"),
    _rule(
        "git.hook_failed",
        "hook_failed",
        r"\bhook id: [\w.-]+|\bpre-commit hook (?:failed|exited)|husky > \S+ hook failed|\bhook exited with code [1-9]",
    ),
    _rule("git.auth_publickey", "auth_failed", r"permission denied \(publickey"),
    _rule(
        "auth.failed",
        "auth_failed",
        r"authentication failed for|could not read username for|invalid (?:username or password|credentials)",
    ),
    # HTTP 429 in every wording a client, an API or a gateway uses.
    _rule(
        "http.rate_limit_words",
        "http_429",
        r"\brate[ -]?limit(?:ed|ing)? (?:exceeded|reached|hit)\b|\bexceeded (?:your|the) (?:\w+ )?rate limit",
    ),
    _rule("http.too_many_requests", "http_429", r"\btoo many requests\b"),
    _rule(
        "http.rate_limited_token",
        "http_429",
        r"\brate_limit(?:ed|_exceeded)\b|\bRateLimitError\b|\bThrottlingException\b|\bRate exceeded\b"
        r"|\brate[ -]limited\b|\b(?:request|call)s? (?:was|were|is|are|being) throttled\b",
    ),
    _rule(
        "http.quota_exceeded", "http_429", r"\bRESOURCE_EXHAUSTED\b|(?<!disk )\bquota exceeded\b"
    ),
    # errno classes, by name and by the C library's message
    _rule(
        "errno.ENOENT",
        "file_not_found",
        r"\bENOENT\b|no such file or directory|\bFileNotFound(?:Error|Exception)\b|\bNoSuchFileException\b|the system cannot find the (?:file|path) specified",
    ),
    _rule(
        "fs.path_missing",
        "file_not_found",
        r"\b(?:file|path|directory)\b[^\n]{0,80}?\b(?:does not exist|not found)\b|\bcannot (?:stat|access|open) '[^']*'|\bcan't open file\b",
    ),
    _rule(
        "errno.EACCES",
        "permission_denied",
        r"\bEACCES\b|\bEPERM\b|permission denied(?! \(publickey)|\bPermissionError\b|operation not permitted|access is denied|\bAccessDeniedException\b",
    ),
    _rule(
        "errno.ENOSPC",
        "no_space_left",
        r"\bENOSPC\b|no space left on device|not enough space on the disk|disk quota exceeded|\bEDQUOT\b|filesystem is full|disk is full",
    ),
    _rule("errno.EMFILE", "too_many_open_files", r"\bE[MN]FILE\b|too many open files"),
    _rule(
        "memory.oom",
        "out_of_memory",
        r"\bout of memory\b|\bOOMKilled\b|\boom-kill|\bMemoryError\b|\bOutOfMemoryError\b|cannot allocate memory|\bENOMEM\b|heap out of memory|memory limit exceeded",
    ),
    _rule(
        "net.timeout",
        "timeout",
        r"\btimed out\b|\btime-?out (?:expired|exceeded|error)\b|\bETIMEDOUT\b|\bdeadline exceeded\b"
        r"|\btimeout (?:after|of) \d|did not (?:finish|complete) within\b|\bgateway time-?out\b",
    ),
    # Case-sensitive: `ReadTimeout`, `TimeoutError`, `TimeoutExpired`, never a `--timeout` flag.
    _rule("net.timeout_class", "timeout", r"(?<![-\w])\w*Timeout(?:Error|Exception|Expired)?\b", 0),
    _rule(
        "net.ECONNREFUSED",
        "connection_refused",
        r"\bECONNREFUSED\b|connection refused|\bConnectionRefusedError\b",
    ),
    _rule(
        "net.ECONNRESET",
        "connection_reset",
        r"\bECONNRESET\b|connection reset by peer|\bConnectionResetError\b|connection was reset",
    ),
    _rule("net.EPIPE", "broken_pipe", r"\bEPIPE\b|broken pipe|\bBrokenPipeError\b"),
    _rule(
        "net.dns",
        "dns_failure",
        r"could not resolve host|\bENOTFOUND\b|\bEAI_AGAIN\b|name or service not known|temporary failure in name resolution|nodename nor servname provided|\bno such host\b|\bNameResolutionError\b|\bgaierror\b|getaddrinfo failed|unknown host",
    ),
    _rule(
        "net.EADDRINUSE",
        "address_in_use",
        r"\bEADDRINUSE\b|address already in use|port is already allocated|only one usage of each socket address",
    ),
    _rule(
        "tls.certificate",
        "tls_certificate",
        r"certificate verify failed|CERTIFICATE_VERIFY_FAILED|x509: certificate|unable to get local issuer certificate|self[- ]signed certificate in certificate chain",
    ),
    # imports and modules
    _rule(
        "py.module_not_found",
        "module_not_found",
        r"\bModuleNotFoundError\b|no module named\b|cannot find module\b|module not found: error: can't resolve|unresolved import\b|is not in (?:GOROOT|std)\b",
    ),
    _rule("py.import_name", "import_error", r"\bcannot import name\b|\bImportError\b"),
    _rule(
        "shell.command_not_found",
        "command_not_found",
        r"\bcommand not found\b|is not recognized as an internal or external command|executable file not found in \$PATH"
        r"|^\S*sh: (?:line )?(?:\d+: )?[\w./-]+: not found$",
    ),
    # package managers
    _rule(
        "pip.resolution_impossible",
        "resolution_impossible",
        r"\bResolutionImpossible\b|conflicting dependencies|\bERESOLVE\b|unable to resolve dependency tree|version solving failed|could not resolve dependencies",
    ),
    _rule(
        "pip.no_matching_version",
        "no_matching_distribution",
        r"no matching distribution found|could not find a version that satisfies|\bETARGET\b|no matching version found",
    ),
    # frameworks and platforms
    _rule(
        "django.conflicting_migrations",
        "conflicting_migrations",
        r"conflicting migrations detected|multiple leaf nodes in the migration graph",
    ),
    _rule(
        "k8s.image_pull",
        "image_pull_backoff",
        r"\bImagePullBackOff\b|\bErrImagePull\b|back-off pulling image|failed to pull image",
    ),
    _rule("k8s.crash_loop", "crash_loop_backoff", r"\bCrashLoopBackOff\b"),
    _rule(
        "docker.name_in_use", "name_conflict", r"container name \"?/?[\w.-]+\"? is already in use"
    ),
    _rule(
        "docker.daemon_down",
        "docker_daemon_unavailable",
        r"cannot connect to the docker daemon|is the docker daemon running",
    ),
    # Coding agents: a call the user, a permission rule or the sandbox refused, and the
    # agents' own words for a command they stopped waiting for.
    _rule(
        "agent.tool_refused",
        "tool_refused",
        r"doesn't want to proceed with this tool use|tool use was rejected|permission to use \w+ has been denied"
        r"|\brejected by (?:the )?user\b|\buser rejected\b|\bexec command rejected\b|\bpatch rejected\b",
    ),
    _rule("agent.sandbox_denied", "sandbox_denied", r"\bfailed in sandbox\b|\bsandbox denied\b"),
    _rule(
        "agent.command_timeout",
        "timeout",
        r"\bno new output after \d+ seconds|\bwas cancelled because it took more than \d+ seconds"
        r"|\btook too long to (?:execute|complete)\b",
    ),
    _rule(
        "agent.limits_exceeded",
        "limits_exceeded",
        r"\bexit_(?:cost|context|total_execution_time)\b|\bLimitsExceeded\b|\berror_max_turns\b"
        r"|\breached maximum (?:iteration|iterations|steps|turns)\b|\bmaximum iteration\b",
    ),
    # Test runners' summaries of a failed run: pytest, unittest, jest/vitest, go, cargo, mocha.
    _rule(
        "test.failed",
        "test_failed",
        r"^=+ .*\b\d+ failed\b|^FAILED \(failures=\d+|^FAILED \(errors=\d+|^Tests?:\s+\d+ failed\b"
        r"|^--- FAIL: |^FAIL\s+\S+\s+[\d.]+s$|^test result: FAILED\b|^\s*\d+ failing$",
        _I | _M,
    ),
    _rule("test.assertion", "assertion_failed", r"\bAssertionError\b|\bassertion failed\b"),
    _rule(
        "db.lock_timeout",
        "lock_timeout",
        r"lock wait timeout exceeded|could not obtain lock|canceling statement due to lock timeout"
        r"|database is locked|error acquiring the state lock",
    ),
)

# Exception classes named in a text. A class that one of the rules above already covers (e.g.
# FileNotFoundError) gives only that rule's class, so Python, Node and Java wordings of the
# same failure get one atom; any other class gives `exception:<Class>`.
EXCEPTION = re.compile(
    r"(?<![\w.])(?:[a-z_][\w]*\.)*([A-Z][A-Za-z0-9]*(?:Error|Exception|Exit|Interrupt|Fault))\b"
)
# Wrappers that say nothing about the failure mode on their own.
GENERIC_EXCEPTIONS = frozenset(
    {
        "Exception",
        "Error",
        "BaseException",
        "RuntimeException",
        "HTTPError",
        "HTTPStatusError",
        "CalledProcessError",
        "SubprocessError",
        "OSError",
        "IOError",
        "EnvironmentError",
        "CommandError",
        "SystemExit",
    }
)

# Errno numbers as Linux prints them (`[Errno 2] ...`); the message beside them usually says
# the same, but a bare number must not be lost.
ERRNO = {
    1: "permission_denied",
    2: "file_not_found",
    12: "out_of_memory",
    13: "permission_denied",
    24: "too_many_open_files",
    28: "no_space_left",
    32: "broken_pipe",
    98: "address_in_use",
    104: "connection_reset",
    110: "timeout",
    111: "connection_refused",
    -2: "dns_failure",
    -3: "dns_failure",
}
ERRNO_PATTERN = re.compile(r"\[(?:Errno|WinError) (-?\d+)\]")

# HTTP statuses, only where the text says it is an HTTP status: "HTTP/1.1 503",
# "status code 404", "HTTP Error 500", "401 Client Error", or the code with its own reason
# phrase ("502 Bad Gateway"). A bare number never is ("412 passed in 9s").
_PHRASES = "|".join(
    re.escape(s.phrase) for s in sorted(HTTPStatus, key=lambda s: -len(s.phrase)) if s >= 400
)
HTTP_STATUS = (
    _rule("http.status_line", "http", r"\bHTTP/\d(?:\.\d)?\s+([45]\d\d)\b"),
    _rule(
        "http.status_code",
        "http",
        r"(?<!exit )\b(?:status(?:[ _-]?code)?|response code|error code|returned error|http ?error|http status|http)"
        r"\s*[:=]?\s*([45]\d\d)\b",
    ),
    _rule("http.client_server_error", "http", r"\b([45]\d\d) (?:Client|Server) Error\b"),
    _rule("http.code_with_phrase", "http", rf"\b([45]\d\d)[ :-]+(?:{_PHRASES})\b"),
)
HTTP_PHRASE_ONLY = (
    (_rule("http.bad_gateway", "http_502", r"\bbad gateway\b")),
    (_rule("http.service_unavailable", "http_503", r"\bservice unavailable\b")),
    (_rule("http.gateway_timeout", "http_504", r"\bgateway time-?out\b")),
    (_rule("http.internal_server_error", "http_500", r"\binternal server error\b")),
)

EXIT_CODE = re.compile(
    r"\b(?:exit(?:ed)?(?: with)?(?: exit)?[ _](?:code|status)|exit_?code|return ?code|returncode|non-zero exit status)\s*[:=]?\s*(-?\d+)\b",
    _I,
)

# A tool call whose status says it succeeded is still a failure when its output says so
# unmistakably (a shell tool returns the command's stderr as its result).
FAILURE_MARKERS = re.compile(
    r"^\s*(?:fatal|error|npm ERR!|E:|FATAL|ERROR)(?:\[\w+\])?[:!]"
    r"|Traceback \(most recent call last\)"
    r"|!\s*\[(?:remote )?rejected\]"
    r"|^HTTP/\d(?:\.\d)?\s+[45]\d\d\b"
    r"|^FAILED\b|^=+ .*\b\d+ (?:failed|errors?)\b"
    r"|\bcommand not found\b"
    r"|\bError response from daemon\b"
    # Coding agents' harnesses stopping a command.
    r"|\bwas cancelled because it took more than \d+ seconds|\btimed out and has been killed\b"
    r"|^Command timed out after\b",
    _M,
)


# ---- One pass to find which rules may match -------------------------------------------------
# A failed step's text is searched by every rule above; Python's engine scans it once per rule
# (about 10 ms for 3 KB of output, a transcript's cost many times over). RE2 reads every rule
# in one linear pass (`re2.Set`), so only the rules it finds are run by `re` — for their match
# and for the exact semantics: a rule with a look-around is given to RE2 without it (RE2 has
# none), which matches at least where the rule does, and `re` decides.

_LOOKAROUND = re.compile(r"\(\?<?[=!]")


def without_lookarounds(pattern: str) -> str:
    """A pattern with its look-arounds dropped: for RE2, which has none; it matches at least
    wherever the original does."""
    out, i = [], 0
    while i < len(pattern):
        found = _LOOKAROUND.match(pattern, i)
        if not found or (i and pattern[i - 1] == "\\"):
            out.append(pattern[i])
            i += 1
            continue
        depth, j = 0, i
        while j < len(pattern):
            if pattern[j] == "\\":
                j += 2
                continue
            depth += {"(": 1, ")": -1}.get(pattern[j], 0)
            j += 1
            if depth == 0:
                break
        i = j
    return "".join(out)


def _re2_text(source: str, flags: int) -> str:
    # Always multi-line: `^` and `$` then match wherever Python's would, and more (Python's
    # `$` also matches before a last line break, RE2's only with `m`).
    return f"(?{'i' if flags & re.IGNORECASE else ''}m)" + without_lookarounds(source)


# (name, pattern's source, its flags) of every pattern the one pass screens for.
SCREENED = (
    *((r.name, r.source, r.flags) for r in (*RULES, *HTTP_STATUS, *HTTP_PHRASE_ONLY)),
    *(
        (name, pattern.pattern, pattern.flags)
        for name, pattern in (
            ("exception", EXCEPTION),
            ("errno", ERRNO_PATTERN),
            ("failure_markers", FAILURE_MARKERS),
        )
    ),
)


@cache
def _screen():
    """Built by the first text screened, not by every process that imports the readers."""
    import re2

    screen = re2.Set.SearchSet(re2.Options())
    for _, source, flags in SCREENED:
        screen.Add(_re2_text(source, flags))
    screen.Compile()
    return screen


def candidates(text: str) -> frozenset[str]:
    """The names of the patterns (`SCREENED`) that may match `text`: a superset of those that
    do, found in one pass."""
    return frozenset(SCREENED[i][0] for i in _screen().Match(text) or ())
