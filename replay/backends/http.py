"""The HTTP replay backend (semantics §14): one signed POST per case to a remote harness.

The body is `{case, rule, replay_token, rule_tool_url, started_url}`, signed with
HMAC-SHA256 over the exact bytes sent (header `X-CauterWeb-Signature: sha256=<hex>`). The
harness reads rules from `rule_tool_url` and signals `started_url`, presenting the token in the
`X-CauterWeb-Replay-Token` header; it answers with the session JSON as the response body.

The token is signed, not stored: it names the replay session and the candidate, and expires.
"""

import hashlib
import hmac
import json

import requests
from django.conf import settings
from django.core import signing

from .python import ReplayCase, ReplayContext

SIGNATURE_HEADER = "X-CauterWeb-Signature"
TOKEN_HEADER = "X-CauterWeb-Replay-Token"
_TOKEN_SALT = "cauterweb.replay-token"
CONNECT_TIMEOUT_S = 10.0


class BadReplayToken(Exception):
    pass


def sign(body: bytes, *, key: str | None = None) -> str:
    key = settings.CAUTERWEB_REPLAY_HMAC_KEY if key is None else key
    return "sha256=" + hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def signature_valid(body: bytes, header: str, *, key: str | None = None) -> bool:
    """For harness authors: check a request really came from this engine."""
    return hmac.compare_digest(sign(body, key=key), header or "")


def token_max_age_s() -> float:
    # Long enough for the slowest legal replay of one case, and no longer.
    return settings.CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S + settings.CAUTERWEB_REPLAY_TIMEOUT_S + 60


def make_token(*, session_id: str, rule_id: str) -> str:
    return signing.dumps({"s": session_id, "r": rule_id}, salt=_TOKEN_SALT, compress=True)


def read_token(token: str) -> tuple[str, str]:
    """(replay session id, candidate id), or BadReplayToken."""
    try:
        data = signing.loads(token or "", salt=_TOKEN_SALT, max_age=token_max_age_s())
    except signing.SignatureExpired:
        raise BadReplayToken("replay token expired") from None
    except signing.BadSignature:
        raise BadReplayToken("invalid replay token") from None
    return data["s"], data["r"]


def api_url(path: str) -> str:
    return settings.CAUTERWEB_PUBLIC_URL.rstrip("/") + "/api/v1/replay/" + path


class HttpBackend:
    """Callable like a Python backend; reads happen through the API, so the engine finds them
    in the database (`remote_reads`)."""

    remote_reads = True

    def __init__(self, url: str):
        self.url = url

    def __call__(self, case: ReplayCase, context: ReplayContext) -> dict:
        body = json.dumps(
            {
                "case": {
                    "id": case.id,
                    "kind": case.kind,
                    "trajectory": case.trajectory,
                    "replay_input": case.replay_input,
                },
                "rule": case.rule,
                "replay_token": make_token(session_id=context.session_id, rule_id=case.rule["id"]),
                "rule_tool_url": api_url("rules"),
                "started_url": api_url("started"),
            },
            sort_keys=True,
            default=str,
        ).encode()
        # The engine enforces the timeouts of §9.3 around this call; the socket timeout only
        # keeps an abandoned request from holding its thread forever.
        longest = settings.CAUTERWEB_REPLAY_ENV_WAIT_TIMEOUT_S + settings.CAUTERWEB_REPLAY_TIMEOUT_S
        response = requests.post(
            self.url,
            data=body,
            headers={"Content-Type": "application/json", SIGNATURE_HEADER: sign(body)},
            timeout=(CONNECT_TIMEOUT_S, longest or None),
        )
        response.raise_for_status()
        return response.json()
