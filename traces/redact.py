"""Secrets redacted on the way in (docs/traces.md, "Secrets"): API keys, tokens, passwords and
private keys in the commands an agent ran and in what they printed never reach the corpus.

A coding agent's log holds everything its shell saw: `env`, `cat .env`, a `curl -H
"Authorization: Bearer …"`, a `git remote -v` with a token in the URL. Every text a log reader
takes (the task, a command, its arguments, its output, its error) passes through `redact`
before anything is derived from it or stored, so the stored rows, the journal and the API can
only ever show `[REDACTED:<kind>]`.

The patterns are the published shapes of each provider's credentials (the same ones secret
scanners such as gitleaks and detect-secrets look for), plus the generic `key = value` shapes
(`password=`, `"api_key": "…"`, `--token …`, `Authorization:` headers, credentials in a URL).
No entropy guessing: a commit hash, a UUID or a digest is not a secret and stays readable.
Pure: no Django.
"""

import re
from functools import cache, cached_property

import re2

from .errors import without_lookarounds

# Provider credentials: (kind, pattern), applied in this order: where one shape contains
# another (an Anthropic key also reads as an OpenAI-style `sk-` key) the first wins.
_PROVIDERS = (
    (
        "private_key",
        r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:.|\n)*?(?:-----END[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----|$)",
    ),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9]{2,8}\d{0,2}-[A-Za-z0-9_-]{20,}"),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}"),
    (
        "aws_access_key_id",
        r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|A3T[A-Z0-9])[A-Z0-9]{16}\b",
    ),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})"),
    ("gitlab_token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    ("slack_token", r"\bxox[abposre]-[A-Za-z0-9-]{10,}|\bxapp-\d-[A-Za-z0-9-]{10,}"),
    ("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]+"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("google_oauth_token", r"\bya29\.[0-9A-Za-z_-]{20,}"),
    ("google_client_secret", r"\bGOCSPX-[0-9A-Za-z_-]{20,}"),
    ("stripe_key", r"\b(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}|\bwhsec_[0-9A-Za-z]{20,}"),
    ("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}"),
    ("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    ("pypi_token", r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,}"),
    ("sendgrid_key", r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
)
# An `Authorization:` header: the scheme is kept, the credentials go.
_AUTH_HEADER = (
    r"(?P<key>\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?"
    r"(?:(?:bearer|basic|token|digest|apikey)\s+)?)(?P<value>[^\s\"',;]{6,})"
)
# A password in a URL: scheme://user:PASSWORD@host.
_URL_PASSWORD = r"(?P<key>\b[a-z][a-z0-9+.-]*://[^\s:/@\"']*:)(?P<value>[^\s@/\"']{3,})(?=@)"
# `key = value`, `"key": "value"`, `KEY=value`, `--key value`, `--key=value`; a quoted value
# is taken to its closing quote (a password may hold spaces).
_KEY_WORDS = (
    r"(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|credentials?|auth[_-]?key)"
)
_KEY_VALUE = (
    r"(?P<key>(?:--|\b)[A-Za-z0-9_.-]*?" + _KEY_WORDS + r"(?-i:[A-Z][a-z]+)?\b"
    r"(?:[\"']?\s*[:=]\s*|(?<=[a-z])\s+(?=[^\s\"'=:]{8,}))(?P<quote>[\"'])?)"
    r"(?P<value>(?(quote)[^\"'\n]{3,256}(?=[\"'])|[^\s\"',;&<>(){}\[\]]{3,}))"
)
# A MySQL-style password glued to its flag: `mysql -u root -pS3cret`.
_MYSQL_PASSWORD = r"(?P<key>\b(?:mysql|mysqldump|mariadb)\b[^\n|;&]*?\s-p)(?P<value>[^\s\"']{3,})"
# Values a `key = value` shape holds that are no secret: references, placeholders, types,
# numbers (`max_tokens=4096`), code, and our own mark.
_NOT_SECRET = re.compile(
    r"^(?:[$%<{*\[(]|\[REDACTED|(?:none|null|nil|true|false|str|string|int|bytes|optional"
    r"|required|undefined|xxx+|changeme|example|redacted|hidden|masked|\*+)$|\d+$"
    # an attribute of code (`os.environ`, `settings.API_KEY`), not a value
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$)",
    re.IGNORECASE,
)


class _Rule:
    """One shape of secret: its pattern, and whether it keeps a key before the value."""

    def __init__(self, kind: str, pattern: str, *, flags=re.IGNORECASE):
        self.kind, self.source, self.flags = kind, pattern, flags
        self.keyed = "(?P<value>" in pattern

    @cached_property
    def pattern(self) -> re.Pattern:
        # Compiled by the first text redacted, not by every process that imports the readers.
        return re.compile(self.source, self.flags)

    def replace(self, match: re.Match) -> str:
        if not self.keyed:
            return f"[REDACTED:{self.kind}]"
        value = match.group("value")
        if _NOT_SECRET.match(value.strip()):
            return match.group(0)
        return match.group("key") + f"[REDACTED:{self.kind}]"


_CASE_SENSITIVE = frozenset({"aws_access_key_id", "google_api_key", "pypi_token", "jwt"})
RULES = (
    *(
        _Rule(kind, pattern, flags=0 if kind in _CASE_SENSITIVE else re.IGNORECASE)
        for kind, pattern in _PROVIDERS
    ),
    _Rule("authorization", _AUTH_HEADER),
    _Rule("url_password", _URL_PASSWORD),
    _Rule("secret", _KEY_VALUE),
    _Rule("password", _MYSQL_PASSWORD),
)


def _re2_text(rule: _Rule) -> str:
    pattern = without_lookarounds(rule.source)
    # `(?(quote)A|B)` (a quoted value runs to its quote) has no RE2 form: either branch.
    pattern = re.sub(r"\(\?\(\w+\)", "(?:", pattern)
    return ("(?i)" if rule.flags & re.IGNORECASE else "") + pattern


@cache
def _screen():
    """One linear pass over a text says which rules may match it (a superset, as in
    `errors.candidates`): most of what a log holds is searched once, not once per rule. Built
    by the first text redacted, not by every process that imports the readers."""
    screen = re2.Set.SearchSet(re2.Options())
    for rule in RULES:
        screen.Add(_re2_text(rule))
    screen.Compile()
    return screen


def redact(text: str) -> str:
    """The text with every secret a rule recognises replaced by `[REDACTED:<kind>]`."""
    if not text:
        return text
    for index in sorted(_screen().Match(text) or ()):
        rule = RULES[index]
        text = rule.pattern.sub(rule.replace, text)
    return text


def redact_value(value: object) -> object:
    """Every string inside a JSON value redacted (keys included: a secret can be a key)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_value(v) for k, v in value.items()}
    return value
