"""The rule tool and scope files (semantics §4, §5).

A scope may hold `/` (`repo:acme/payments` is an ordinary scope), so `scope` is a `path`
parameter; `/scopes/{scope}/rules` is declared first, so `/scopes/a/b/rules` is the rule tool
of scope `a/b`."""

from ninja import Query, Router, Schema
from pydantic import Field

from lifecycle.scopes import render_scope, rule_tool_read

from .auth import READ
from .errors import ERRORS
from .schemas import ScopeFileOut, ScopeName, Text, ToolReadOut

router = Router(tags=["rule tool"])


class ToolQuery(Schema):
    session: Text | None = Field(None, min_length=1, max_length=128)
    query: Text | None = Field(None, max_length=2000)


@router.get(
    "/scopes/{path:scope}/rules",
    operation_id="ruleTool",
    auth=READ,
    response={200: ToolReadOut, **ERRORS},
    summary="The rule tool: active rules (narrowed by query) and always every candidate",
    description="Each read is recorded against `session` (semantics §5). Pass the agent's "
    "session id so a candidate's trial can tell whether the session read it.",
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
)
def get_scope(request, scope: ScopeName):
    return {"scope": scope, "text": render_scope(scope)}
