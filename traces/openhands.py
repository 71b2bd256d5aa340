"""OpenHands event streams (docs/traces.md, "OpenHands"), in the shapes OpenHands stores and
exports them:

- **V0 events** (`openhands.events`): an action `{id, source, action, args, timestamp,
  tool_call_metadata}` — `run` (`args.command`), `run_ipython` (`args.code`), `read`, `edit`,
  `write` (`args.path`), `browse`, `call_tool_mcp`, `message` (a user's is the task),
  `finish` (`args.task_completed`) — and its observation `{cause: <action id>, observation,
  content, extras}` — `run` with `extras.metadata.exit_code` (older: `extras.exit_code`),
  `error`, `user_rejected`, `agent_state_changed` (`extras.agent_state`: `error`, `finished`);
  stored one file per event (`sessions/<id>/events/<n>.json`), exported as a JSON list, or as an
  evaluation's output line `{instance_id, instruction, history, error}`;
- **V1 events** (the OpenHands software-agent SDK): `{kind, …}` — `MessageEvent`,
  `ActionEvent` `{tool_name, tool_call_id, action}`, `ObservationEvent` `{tool_call_id,
  observation {content, is_error, exit_code}}`, `AgentErrorEvent`, `UserRejectObservation`,
  `ConversationStateUpdateEvent` (`execution_status`); stored one file per event under
  `conversations/<id>/events/`.
"""

from collections.abc import Iterable

from . import jsonl
from .model import iso_time, trajectory_id
from .session_log import SessionLog

FORMAT = "openhands"
V1_KINDS = frozenset(
    {
        "MessageEvent",
        "ActionEvent",
        "ObservationEvent",
        "AgentErrorEvent",
        "UserRejectObservation",
        "SystemPromptEvent",
        "ConversationStateUpdateEvent",
        "PauseEvent",
        "Condensation",
        "CondensationRequest",
    }
)
_TOOL_ACTIONS = {
    "run": "execute_bash",
    "run_ipython": "execute_ipython_cell",
    "read": "read",
    "edit": "edit",
    "write": "write",
    "browse": "browse",
    "browse_interactive": "browser",
}


def is_event(item: object) -> bool:
    return isinstance(item, dict) and (
        (
            "action" in item
            and isinstance(item.get("action"), str)
            and ("args" in item or "source" in item)
        )
        or ("observation" in item and isinstance(item.get("observation"), str))
        or item.get("kind") in V1_KINDS
    )


def looks_like(first: object) -> bool:
    """A single event, a list of events, or an object holding one (`history`, `events`)."""
    if isinstance(first, list):
        return bool(first) and is_event(first[0])
    if not isinstance(first, dict):
        return False
    if is_event(first):
        return True
    history = first.get("history", first.get("events"))
    return isinstance(history, list) and (not history or is_event(history[0]))


def _text(value: object) -> str:
    return jsonl.text_of(value) if not isinstance(value, str) else value


class _Session:
    def __init__(self, log: SessionLog):
        self.log = log

    def event(self, event: dict) -> None:
        log = self.log
        log.started_at = log.started_at or iso_time(event.get("timestamp"))
        if event.get("kind") in V1_KINDS:
            self.v1(event)
        elif isinstance(event.get("action"), str):
            self.action(event)
        elif isinstance(event.get("observation"), str):
            self.observation(event)

    def action(self, event: dict) -> None:
        kind, args = (
            event["action"],
            event.get("args") if isinstance(event.get("args"), dict) else {},
        )
        if kind == "message" and event.get("source") == "user":
            self.log.set_task(_text(args.get("content")))
        elif kind == "finish":
            completed = str(args.get("task_completed", "")).lower()
            self.log.end(
                failed=True if completed == "false" else None if not completed else False,
                message=_text(args.get("final_thought") or args.get("thought") or ""),
            )
        elif kind == "reject":
            self.log.end(failed=True, message=_text(args.get("reason") or "rejected"))
        elif kind in _TOOL_ACTIONS or kind == "call_tool_mcp":
            metadata = event.get("tool_call_metadata") or {}
            tool = metadata.get("function_name") or (
                args.get("name") if kind == "call_tool_mcp" else _TOOL_ACTIONS[kind]
            )
            arguments = {
                k: v
                for k, v in args.items()
                if k
                not in (
                    "thought",
                    "security_risk",
                    "is_input",
                    "blocking",
                    "hidden",
                    "confirmation_state",
                    "is_confirmed",
                    "keep_prompt",
                )
            }
            if kind == "run_ipython":
                arguments = {"code": args.get("code")}
            self.log.call(
                str(event.get("id")), str(tool), arguments, at=iso_time(event.get("timestamp"))
            )

    def observation(self, event: dict) -> None:
        kind = event["observation"]
        extras = event.get("extras") if isinstance(event.get("extras"), dict) else {}
        cause = str(event.get("cause")) if event.get("cause") is not None else ""
        content = _text(event.get("content"))
        if kind == "agent_state_changed":
            state = extras.get("agent_state")
            if state in ("error", "rejected"):
                self.log.end(
                    failed=True, message=str(extras.get("reason") or f"agent state: {state}")
                )
            elif state == "finished":
                self.log.end(failed=None)
            return
        if kind == "error" and not cause:
            self.log.end(failed=None, message=content)
            return
        metadata = extras.get("metadata") if isinstance(extras.get("metadata"), dict) else extras
        code = metadata.get("exit_code")
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        if kind in ("error", "user_rejected"):
            error = (
                content or "The user rejected this action" if kind == "user_rejected" else content
            )
            self.log.result(cause, error=error or kind, failed=True)
        elif code is not None:
            self.log.result(cause, output=content, failed=code != 0, exit_code=code)
        else:
            self.log.result(cause, output=content)

    def v1(self, event: dict) -> None:
        kind = event["kind"]
        call_id = str(event.get("tool_call_id") or event.get("action_id") or "")
        if kind == "MessageEvent" and event.get("source") == "user":
            message = event.get("llm_message") or {}
            self.log.set_task(_text(message.get("content")) if isinstance(message, dict) else "")
        elif kind == "ActionEvent":
            action = event.get("action") if isinstance(event.get("action"), dict) else {}
            arguments = {k: v for k, v in action.items() if k not in ("kind", "security_risk")}
            self.log.call(
                call_id,
                str(event.get("tool_name") or action.get("kind") or ""),
                arguments,
                at=iso_time(event.get("timestamp")),
            )
        elif kind == "ObservationEvent":
            observation = (
                event.get("observation") if isinstance(event.get("observation"), dict) else {}
            )
            metadata = (
                observation.get("metadata") if isinstance(observation.get("metadata"), dict) else {}
            )
            code = observation.get("exit_code", metadata.get("exit_code"))
            code = code if isinstance(code, int) and not isinstance(code, bool) else None
            failed = (
                bool(observation.get("is_error"))
                or (code not in (None, 0))
                or bool(observation.get("timeout"))
            )
            self.log.result(
                call_id,
                output=_text(observation.get("content") or observation.get("output")),
                failed=failed,
                exit_code=code,
            )
        elif kind == "AgentErrorEvent":
            self.log.result(call_id, error=str(event.get("error") or "agent error"), failed=True)
        elif kind == "UserRejectObservation":
            reason = str(event.get("rejection_reason") or "")
            self.log.result(
                call_id, error=f"The user rejected this action. {reason}".strip(), failed=True
            )
        elif kind == "ConversationStateUpdateEvent" and event.get("key") == "execution_status":
            value = str(event.get("value"))
            if value in ("error", "stuck"):
                self.log.end(failed=True, message=f"execution status: {value}")


def session(
    events: Iterable[dict],
    *,
    session_id: str,
    source: dict,
    task: str = "",
    error: str = "",
) -> dict:
    """The events of one session (in order; an event seen twice counts once) as a trajectory."""
    log = SessionLog(
        fmt=FORMAT, id=trajectory_id("openhands", session_id), session_id=session_id, source=source
    )
    log.set_task(task)
    reader = _Session(log)
    seen = set()
    for event in events:
        key = (
            event.get("id"),
            event.get("kind") or event.get("action") or event.get("observation"),
        )
        if event.get("id") is not None and key in seen:
            continue
        seen.add(key)
        reader.event(event)
    if error:
        log.end(failed=True, message=error)
    return log.trajectory()


def event_order(event: dict) -> tuple:
    """Events in the order OpenHands numbered them (V0 ids are integers; V1 events by time)."""
    identifier = event.get("id")
    if isinstance(identifier, int):
        return (0, identifier, "")
    return (1, 0, str(event.get("timestamp") or ""))
