"""The HTTP replay backend (semantics §14): one signed POST per case to a remote harness.

The body is `{case, rule, arm, replay_token, rule_tool_url, started_url, sent_at, nonce}`,
signed with HMAC-SHA256 over the exact bytes sent (header `X-CauterWeb-Signature:
sha256=<hex>`); `sent_at` (Unix seconds) and `nonce` (random, never reused) are inside the
signed body and repeated in `X-CauterWeb-Timestamp` / `X-CauterWeb-Nonce`, so a harness
refuses a captured request sent again (`request_refusal`). The harness reads rules from
`rule_tool_url` and signals `started_url`, presenting the token in the
`X-CauterWeb-Replay-Token` header; it answers with the session JSON as the response body,
signed back: `X-CauterWeb-Signature: sha256=<HMAC of nonce + "." + the exact answer bytes>`
(`sign_answer`). An answer unsigned, signed wrongly or for another request is not trusted:
the replay is inconclusive with that reason (docs/semantics.md#s14-5).

The token is the replay's own capability: random, unguessable, stored with the replay and
valid while it runs. It is part of both URLs, so only this replay's harness can read rules as
this replay or signal its start.
"""

import hashlib
import hmac
import json
import secrets
import threading
import time
from collections import OrderedDict

import requests
from django.conf import settings

from .python import ReplayCase, ReplayContext

SIGNATURE_HEADER = "X-CauterWeb-Signature"
TIMESTAMP_HEADER = "X-CauterWeb-Timestamp"
NONCE_HEADER = "X-CauterWeb-Nonce"
CONNECT_TIMEOUT_S = 10.0
# A harness accepts a request sent at most this long ago (or ahead, for clock skew).
MAX_AGE_S = 300.0


class AnswerRefused(Exception):
    """The harness's answer cannot be trusted: the replay is inconclusive with this reason."""


def sign(body: bytes, *, key: str | None = None) -> str:
    key = settings.CAUTERWEB_REPLAY_HMAC_KEY if key is None else key
    return "sha256=" + hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


def signature_valid(body: bytes, header: str, *, key: str | None = None) -> bool:
    """For harness authors: check a request really came from this engine."""
    return hmac.compare_digest(sign(body, key=key), header or "")


def sign_answer(body: bytes, nonce: str, *, key: str | None = None) -> str:
    """The signature a harness puts on its answer to the request carrying `nonce`."""
    return sign(nonce.encode() + b"." + body, key=key)


class Nonces:
    """The nonces a harness has seen within `MAX_AGE_S`, to refuse a request sent twice."""

    def __init__(self, *, max_age_s: float = MAX_AGE_S):
        self.max_age_s = max_age_s
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, nonce: str, now: float) -> bool:
        with self._lock:
            while self._seen and next(iter(self._seen.values())) < now - 2 * self.max_age_s:
                self._seen.popitem(last=False)
            if nonce in self._seen:
                return False
            self._seen[nonce] = now
            return True


def request_refusal(
    body: bytes,
    header: str,
    *,
    nonces: Nonces,
    key: str | None = None,
    now: float | None = None,
) -> str | None:
    """For harness authors: why a replay request must be refused, or None to run it. Checks
    the signature, that it was sent within `MAX_AGE_S` (either way) and that its nonce was
    not seen before."""
    if not signature_valid(body, header, key=key):
        return f"bad or missing {SIGNATURE_HEADER}"
    try:
        request = json.loads(body)
        sent_at, nonce = float(request["sent_at"]), str(request["nonce"])
    except (ValueError, KeyError, TypeError):
        return "the request carries no sent_at and nonce"
    now = time.time() if now is None else now
    if abs(now - sent_at) > nonces.max_age_s:
        return f"stale request: sent {now - sent_at:.0f} s ago (at most {nonces.max_age_s:g} s)"
    if not nonces.first_time(nonce, now):
        return "replayed request: its nonce was seen before"
    return None


def api_url(path: str) -> str:
    return settings.CAUTERWEB_PUBLIC_URL.rstrip("/") + "/api/v1/replay/" + path


class HttpBackend:
    """Callable like a Python backend; reads happen through the API, so the engine finds them
    in the database (`remote_reads`)."""

    remote_reads = True

    def __init__(self, url: str):
        self.url = url

    def __call__(self, case: ReplayCase, context: ReplayContext) -> dict:
        sent_at, nonce = int(time.time()), secrets.token_hex(16)
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
                "sent_at": sent_at,
                "nonce": nonce,
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
            headers={
                "Content-Type": "application/json",
                SIGNATURE_HEADER: sign(body),
                TIMESTAMP_HEADER: str(sent_at),
                NONCE_HEADER: nonce,
            },
            timeout=(CONNECT_TIMEOUT_S, longest or None),
        )
        response.raise_for_status()
        signed = response.headers.get(SIGNATURE_HEADER, "")
        if not hmac.compare_digest(sign_answer(response.content, nonce), signed):
            raise AnswerRefused(
                f"the harness's answer is not signed for this request ({SIGNATURE_HEADER}: "
                "HMAC-SHA256 of the nonce, '.', and the exact answer)"
            )
        return response.json()
