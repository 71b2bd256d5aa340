"""A typed Python client for CauterWeb's API, and a replay harness in ten lines.

No Django here: install the package, or copy this module; it needs only `httpx`.

    from cauterweb.client import CauterWeb, serve_harness

    with CauterWeb("https://cauterweb.example", token="cw_…") as cw:
        cw.post_traces(open("export.otlp.pb", "rb").read(), content_type="application/x-protobuf")
        rules = cw.rules("git", query="action:git.push", session="sess-42")

    def replay(case, rule_tool, mark_started, arm):       # your agent, re-run on one case
        mark_started()
        rules = rule_tool(scope=case.rule["scope"], query=case.task)
        return {"traces": [{"metrics": run_agent(case.replay_input, rules)}]}

    serve_harness(replay, key=os.environ["CAUTERWEB_REPLAY_HMAC_KEY"], port=8770)

The harness follows the HTTP replay contract (semantics §14): it checks the request's
`X-CauterWeb-Signature` (HMAC-SHA256 of the exact body, `sha256=<hex>`), refuses a request
sent more than 300 s ago or ahead, or whose `nonce` it has seen (a captured request sent
again), signs its answer back (HMAC-SHA256 of the nonce, ".", and the exact answer), gives the agent a rule
tool that reads from `rule_tool_url` and a `mark_started` that signals `started_url` (both
with the per-replay token), passes the `arm` (`treatment` / `control`) when the engine sends
one, and answers with the session JSON the agent returned.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

SIGNATURE_HEADER = "X-CauterWeb-Signature"
TOKEN_HEADER = "X-CauterWeb-Replay-Token"
Session = dict[str, Any]
RuleTool = Callable[..., list[dict]]


class CauterWebError(Exception):
    """The API answered with an error: its status, detail and per-item errors."""

    def __init__(self, status: int, detail: str, errors: list[dict] | None = None):
        super().__init__(f"{status}: {detail}")
        self.status, self.detail, self.errors = status, detail, errors or []


@dataclass(frozen=True)
class Imported:
    created: int
    unchanged: int
    updated: int
    ids: list[str] = field(default_factory=list)


class CauterWeb:
    """The API of one CauterWeb server, as an agent token sees it."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ):
        self._http = httpx.Client(
            base_url=base_url.rstrip("/") + "/api/v1",
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> CauterWeb:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = {"detail": response.text}
            raise CauterWebError(response.status_code, body.get("detail", ""), body.get("errors"))
        return response

    def _imported(self, response: httpx.Response) -> Imported:
        body = response.json()
        return Imported(body["created"], body["unchanged"], body["updated"], body.get("ids", []))

    def post_traces(
        self,
        body: bytes | str | dict,
        *,
        format: str | None = None,
        content_type: str | None = None,
        replace: bool = False,
    ) -> Imported:
        """Agent traces (OTLP JSON or protobuf, OpenInference, Langfuse, Inspect) → one
        trajectory per session, signatures derived."""
        if isinstance(body, dict):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        params: dict[str, Any] = {"replace": replace}
        if format:
            params["format"] = format
        response = self._send(
            "POST",
            "/traces",
            content=body,
            params=params,
            headers={
                "Content-Type": content_type or "application/json",
                "Accept": "application/json",
            },
        )
        return self._imported(response)

    def post_trajectories(self, trajectories: Iterable[dict], *, replace: bool = False) -> Imported:
        """Corpus lines (semantics §2); a trajectory without a signature gets a derived one."""
        response = self._send(
            "POST", "/trajectories", json=list(trajectories), params={"replace": replace}
        )
        return self._imported(response)

    def post_reports(self, reports: Iterable[dict]) -> Imported:
        """Session reports (semantics §2): session_id, at, notices, metrics, rules_read."""
        return self._imported(self._send("POST", "/reports", json=list(reports)))

    def record_candidates(self, candidates: Iterable[dict]) -> list[dict]:
        """Candidate rules (trigger, directive, scope, metric, signature …), each returned with
        its forward-trial baseline."""
        return self._send("POST", "/candidates", json=list(candidates)).json()["candidates"]

    def rules(
        self, scope: str, *, query: str | None = None, session: str | None = None
    ) -> list[dict]:
        """The rule tool (semantics §5): active rules (narrowed by `query`) and every candidate;
        the read is recorded against `session`."""
        params = {k: v for k, v in {"query": query, "session": session}.items() if v}
        return self._send("GET", f"/scopes/{scope}/rules", params=params).json()["rules"]


# ---- the replay harness (semantics §14) -----------------------------------------------------


@dataclass(frozen=True)
class ReplayCase:
    """One case to re-run: `replay_input` is what the agent needs (else the task)."""

    id: str
    kind: str  # "failing" | "win"
    trajectory: dict
    replay_input: Any
    rule: dict

    @property
    def task(self) -> str:
        return str(self.trajectory.get("task", ""))


ReplayFn = Callable[[ReplayCase, RuleTool, Callable[[], None], "str | None"], Session]


def signature(body: bytes, key: str) -> str:
    return "sha256=" + hmac.new(key.encode(), body, hashlib.sha256).hexdigest()


# A request is refused if sent longer ago (or further ahead) than this, or if its nonce was
# seen within twice this.
MAX_AGE_S = 300.0


class Harness:
    """An HTTP replay harness serving one agent function."""

    def __init__(
        self, replay_fn: ReplayFn, *, key: str, host: str, port: int, timeout: float = 30.0
    ):
        self.replay_fn, self.key, self.timeout = replay_fn, key, timeout
        self._nonces: OrderedDict[str, float] = OrderedDict()
        self._nonces_lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/"

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def start(self) -> Harness:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Harness:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _first_time(self, nonce: str, now: float) -> bool:
        with self._nonces_lock:
            while self._nonces and next(iter(self._nonces.values())) < now - 2 * MAX_AGE_S:
                self._nonces.popitem(last=False)
            if nonce in self._nonces:
                return False
            self._nonces[nonce] = now
            return True

    def handle(self, body: bytes, signed: str) -> tuple[int, dict]:
        """(status, JSON answer) for one signed replay request."""
        if not hmac.compare_digest(signature(body, self.key), signed or ""):
            return 401, {"detail": "bad or missing X-CauterWeb-Signature"}
        try:
            request = json.loads(body)
            sent_at, nonce = float(request["sent_at"]), str(request["nonce"])
        except (ValueError, KeyError, TypeError):
            return 401, {"detail": "the request carries no sent_at and nonce"}
        now = time.time()
        if abs(now - sent_at) > MAX_AGE_S:
            return 401, {"detail": f"stale request: sent {now - sent_at:.0f} s ago"}
        if not self._first_time(nonce, now):
            return 401, {"detail": "replayed request: its nonce was seen before"}
        try:
            case = ReplayCase(**request["case"], rule=request["rule"])
            token, rule_tool_url, started_url = (
                request["replay_token"],
                request["rule_tool_url"],
                request["started_url"],
            )
        except (ValueError, KeyError, TypeError) as exc:
            return 400, {"detail": f"not a replay request: {exc}"}
        headers = {TOKEN_HEADER: token}
        with httpx.Client(headers=headers, timeout=self.timeout) as http:

            def rule_tool(scope: str | None = None, query: str | None = None) -> list[dict]:
                params = {k: v for k, v in {"scope": scope, "query": query}.items() if v}
                response = http.get(rule_tool_url, params=params)
                response.raise_for_status()
                return response.json()

            def mark_started() -> None:
                http.post(started_url).raise_for_status()

            session = self.replay_fn(case, rule_tool, mark_started, request.get("arm"))
        return 200, session


def _handler(harness: Harness) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the http.server naming)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                status, answer = harness.handle(body, self.headers.get(SIGNATURE_HEADER, ""))
            except Exception as exc:  # the agent failed: the engine counts the case inconclusive
                status, answer = 500, {"detail": f"{type(exc).__name__}: {exc}"}
            data = json.dumps(answer).encode()
            self.send_response(status)
            if status == 200:  # the answer, signed back for the request's nonce
                nonce = json.loads(body)["nonce"].encode()
                self.send_header(SIGNATURE_HEADER, signature(nonce + b"." + data, harness.key))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return  # the engine journals every replay; no access log on stderr

    return Handler


def serve_harness(
    replay_fn: ReplayFn,
    *,
    key: str,
    host: str = "127.0.0.1",
    port: int = 8770,
    block: bool = True,
) -> Harness:
    """Serve `replay_fn(case, rule_tool, mark_started, arm) -> session` as the HTTP replay
    harness of semantics §14. Point `CAUTERWEB_REPLAY_BACKEND` at its URL and give both sides
    the same `CAUTERWEB_REPLAY_HMAC_KEY`. Blocks unless `block=False` (then it runs in a
    background thread; `stop()` ends it)."""
    harness = Harness(replay_fn, key=key, host=host, port=port)
    if not block:
        return harness.start()
    harness.serve_forever()
    return harness
