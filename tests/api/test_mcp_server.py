"""The rule tool over MCP (semantics §4, §5): listed and called through the official SDK's
client, in process, over stdio and over streamable HTTP; candidates always come back, a query
narrows only the active rules, and every read is recorded against the session."""

import json
import socket
import threading

import anyio
import httpx2
import pytest
import uvicorn
from mcp.client import Client

from cauterweb.mcp_server import Caller, NoToken, build_server, stdio_caller
from lifecycle.models import RuleRead
from lifecycle.services.rules import rule_promote
from lifecycle.services.tokens import token_create
from lifecycle.states import Actor
from tests.builders import candidate


def world():
    """Scope git: an active rule about pushes, an active rule about the lockfile, a candidate."""
    candidate("C-1", scope="git")
    candidate("A-1", scope="git", trigger="when the push is rejected", directive="pull first")
    rule_promote(rule_id="A-1", actor=Actor.engine(), evidence={}, reason="trial", validator="x")
    candidate(
        "A-2",
        scope="git",
        trigger="when the lockfile is stale",
        directive="regenerate it",
        signature=[],
    )
    rule_promote(rule_id="A-2", actor=Actor.engine(), evidence={}, reason="trial", validator="x")


def payload(result) -> dict:
    assert not result.is_error, result
    if result.structured_content:
        return result.structured_content
    return json.loads(result.content[0].text)


async def list_and_call(server, **arguments):
    async with Client(server) as client:
        tools = await client.list_tools()
        result = await client.call_tool("rules", arguments)
    return tools, payload(result)


@pytest.fixture
def agent(transactional_db):
    world()
    return token_create(name="claude-code", role="agent", actor="test").key


def test_the_tool_is_listed_and_returns_candidates_and_narrowed_active_rules(agent):
    server = build_server(caller=Caller("claude-code", "agent"))
    tools, found = anyio.run(
        lambda: list_and_call(
            server, scope="git", query="action:git.push error:non_fast_forward", session="sess-42"
        )
    )
    assert [t.name for t in tools.tools] == ["rules"]
    assert set(tools.tools[0].input_schema["properties"]) == {"scope", "query", "session"}
    # The query narrows the active rules to the push rule; the candidate is always returned.
    assert [r["id"] for r in found["rules"]] == ["A-1", "C-1"]
    assert found["session"] == "sess-42"
    reads = RuleRead.objects.filter(session_id="sess-42")
    assert sorted(reads.values_list("rule_id", "via")) == [("A-1", "mcp"), ("C-1", "mcp")]


def test_without_a_query_every_rule_of_the_scope_comes_back(agent):
    server = build_server(caller=Caller("claude-code", "agent"))
    _, found = anyio.run(lambda: list_and_call(server, scope="git", session="sess-7"))
    assert [r["id"] for r in found["rules"]] == ["A-1", "A-2", "C-1"]
    assert RuleRead.objects.filter(session_id="sess-7").count() == 3


def test_the_stdio_server_needs_a_live_agent_token(agent):
    assert stdio_caller({"CAUTERWEB_AGENT_TOKEN": agent}) == Caller("claude-code", "agent")
    for environ in ({}, {"CAUTERWEB_AGENT_TOKEN": "cw_not-a-token"}):
        with pytest.raises(NoToken):
            stdio_caller(environ)


@pytest.fixture
def http_server(agent):
    # The socket listens before the server thread starts: connections wait in its backlog, so
    # the test never has to wait for the server to come up.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = build_server(public_url=url).streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    yield url
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


def test_over_http_a_bearer_agent_token_reads_and_the_read_is_recorded(agent, http_server):
    async def go():
        headers = {"Authorization": f"Bearer {agent}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            from mcp.client.streamable_http import streamable_http_client

            transport = streamable_http_client(f"{http_server}/mcp", http_client=http)
            async with Client(transport) as client:
                tools = await client.list_tools()
                result = await client.call_tool("rules", {"scope": "git", "session": "sess-http"})
        return tools, payload(result)

    tools, found = anyio.run(go)
    assert [t.name for t in tools.tools] == ["rules"]
    assert {r["id"] for r in found["rules"]} == {"A-1", "A-2", "C-1"}
    assert RuleRead.objects.filter(session_id="sess-http", via="mcp").count() == 3


@pytest.mark.parametrize("token", [None, "cw_not-a-token"])
def test_over_http_no_valid_token_is_a_401(agent, http_server, token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = httpx2.post(
        f"{http_server}/mcp",
        json=body,
        headers={**headers, "Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 401
    assert not RuleRead.objects.exists()


def test_the_mcp_command_refuses_to_start_without_a_live_token(agent, monkeypatch):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    monkeypatch.delenv("CAUTERWEB_AGENT_TOKEN", raising=False)
    with pytest.raises(CommandError, match="CAUTERWEB_AGENT_TOKEN"):
        call_command("mcp")
