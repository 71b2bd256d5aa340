"""The HTTP replay backend (semantics §14): one signed POST per case to a remote harness.

The body is `{case, rule, arm, replay_token, rule_tool_url, started_url}`, signed with
HMAC-SHA256 over the exact bytes sent (header `X-CauterWeb-Signature: sha256=<hex>`). The
harness reads rules from `rule_tool_url` and signals `started_url`, presenting the token in the
`X-CauterWeb-Replay-Token` header; it answers with the session JSON as the response body.

The token is the replay's own capability: random, unguessable, stored with the replay and
valid while it runs. It is part of both URLs, so only this replay's harness can read rules as
this replay or signal its start.
"""

import hashlib
import hmac
import json

import requests
from django.conf import settings

from .python import ReplayCase, ReplayContext

SIGNATURE_HEADER = "X-CauterWeb-Signature"
CONNECT_TIMEOUT_S = 10.0


def sign(body: bytes, *, key: str | None = None) -> str:
    key = settings.CAUTERWEB_REPLAY_HMAC_KEY if key is None else key
    return "sha256=" + hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def signature_valid(body: bytes, header: str, *, key: str | None = None) -> bool:
    """For harness authors: check a request really came from this engine."""
    return hmac.compare_digest(sign(body, key=key), header or "")


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
                "arm": context.arm,
                "replay_token": context.token,
                "rule_tool_url": api_url(f"{context.token}/rules"),
                "started_url": api_url(f"{context.token}/started"),
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
