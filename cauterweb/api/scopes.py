"""The rule tool and scope files (semantics §4, §5).

A scope may hold `/` (`repo:acme/payments` is an ordinary scope), so `scope` is a `path`
parameter; `/scopes/{scope}/rules` is declared first, so `/scopes/a/b/rules` is the rule tool
of scope `a/b`."""

from ninja import Query, Router, Schema
from pydantic import Field

from lifecycle import limits
from lifecycle.scopes import render_scope, rule_tool_read

from .protocol import ERRORS, READ
from .schemas import ScopeFileOut, ScopeName, Text, ToolReadOut

router = Router(tags=["rule tool"])


class ToolQuery(Schema):
    session: Text | None = Field(None, min_length=1, max_length=limits.SESSION_ID)
    query: Text | None = Field(None, max_length=2000)


class FileQuery(Schema):
    session: Text | None = Field(None, min_length=1, max_length=limits.SESSION_ID)


@router.get(
    "/scopes/{path:scope}/rules",
    operation_id="ruleTool",
    auth=READ,
    response={200: ToolReadOut, **ERRORS},
    summary="The rule tool: active rules (narrowed by query) and the candidates served",
    description="Each read is recorded against `session` (semantics §5). Under randomized "
    "forward trials (the default, semantics §20) the session is assigned to each candidate's "
    "treatment or control arm on its first read and served the candidates of its treatment "
    "arms only; a read without `session` is served active rules only. Under the baseline "
    "design every candidate is served.",
)
def get_scope_rules(request, scope: ScopeName, params: Query[ToolQuery]):
    rules = rule_tool_read(scope=scope, session_id=params.session or "", query=params.query)
    return {"scope": scope, "session": params.session, "rules": rules}


@router.get(
    "/scopes/{path:scope}",
    operation_id="scopeFile",
    auth=READ,
    response={200: ScopeFileOut, **ERRORS},
    summary="The rendered scope file: active rules, then the provisional ones (semantics §4)",
    description="With `session`, a read of that session, assigned and recorded as the rule "
    "tool's (semantics §20.1); without it, under randomized trials, the file lists no "
    "candidate and says that candidates are served per session.",
)
def get_scope(request, scope: ScopeName, params: Query[FileQuery]):
    return {"scope": scope, "text": render_scope(scope, session_id=params.session or "")}
