"""The rule tool over MCP (semantics §4, §5), with the official `mcp` SDK.

One tool, `rules`: the rules for a scope and/or a query, with the semantics of the API's rule
tool — it is the same function (`lifecycle.scopes.rule_tool_read`): a query narrows only the
active rules, the read is recorded against the session that made it, and under randomized
forward trials (semantics §20) the session is served the candidates of its treatment arms
only (none without a session id).

Transports and who is calling:
- stdio (`cauterweb mcp`): the agent's API token in `CAUTERWEB_AGENT_TOKEN`, checked when the
  server starts; the session defaults to `CAUTERWEB_SESSION_ID`.
- streamable HTTP (`cauterweb mcp --http`): `Authorization: Bearer <agent token>` on every
  request, checked by the SDK's bearer middleware against our tokens.
A tool call may name its `session` explicitly; that is what a harness running many sessions
through one server does.
"""

import os
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.db import connections
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from lifecycle.scopes import rule_tool_read
from lifecycle.services.tokens import token_for_key

TOKEN_ENV = "CAUTERWEB_AGENT_TOKEN"
SESSION_ENV = "CAUTERWEB_SESSION_ID"
TOOL_DESCRIPTION = (
    "The rules this team has learned from past agent failures. Call it before acting in a "
    "scope (e.g. 'git', 'repo:payments'), or with a query (words or atoms such as "
    "'action:git.push error:non_fast_forward'). Active rules are the team's standing "
    "practice; candidates are provisional rules under evaluation: follow them too, they are "
    "measured by whether they help. Pass your session id, so the rules you are served stay "
    "the same for the whole session."
)


def _db(fn, /, *args, **kwargs):
    """An ORM call made from the server's event loop: in a worker thread, whose connection is
    closed after it, so no request leaves a database session open behind it."""

    def run():
        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()

    return sync_to_async(run)()


class NoToken(Exception):
    """The stdio server needs a live agent token in CAUTERWEB_AGENT_TOKEN."""


@dataclass(frozen=True)
class Caller:
    name: str
    role: str


class AgentTokens:
    """The SDK's TokenVerifier over our API tokens (only their SHA-256 is stored)."""

    async def verify_token(self, token: str) -> AccessToken | None:
        found = await _db(token_for_key, token.strip())
        if found is None:
            return None
        return AccessToken(token=token, client_id=found.name, scopes=[found.role])


def stdio_caller(environ: dict | None = None) -> Caller:
    environ = os.environ if environ is None else environ
    key = (environ.get(TOKEN_ENV) or "").strip()
    found = token_for_key(key) if key else None
    if found is None:
        raise NoToken(f"set {TOKEN_ENV} to a live API token (manage.py create_token NAME)")
    return Caller(found.name, found.role)


def build_server(*, caller: Caller | None = None, public_url: str | None = None) -> MCPServer:
    """The MCP server. With `caller` (stdio, in-process) every call is that token's; with
    `public_url` (HTTP) each request must carry a bearer token."""
    auth = {}
    if public_url is not None:
        base = public_url.rstrip("/")
        auth = {
            "token_verifier": AgentTokens(),
            # Our tokens are opaque API keys looked up in our own table, not audience-bound
            # OAuth tokens: there is no resource claim to check.
            "auth": AuthSettings(
                issuer_url=base,
                resource_server_url=f"{base}/mcp",
                validate_token_resource=False,
            ),
        }
    server = MCPServer(
        "cauterweb",
        instructions="Read the team's rules for what you are about to do: the `rules` tool.",
        **auth,
    )

    @server.tool(name="rules", description=TOOL_DESCRIPTION)
    async def rules(
        scope: str | None = None, query: str | None = None, session: str | None = None
    ) -> dict:
        token = get_access_token()
        if caller is None and token is None:
            raise ToolError("an agent API token is required")
        session_id = (session or os.environ.get(SESSION_ENV) or "").strip()[:128]
        found = await _db(
            rule_tool_read, scope=(scope or None), session_id=session_id, query=query, via="mcp"
        )
        return {"scope": scope, "session": session_id or None, "rules": found}

    return server
