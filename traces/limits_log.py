"""How much of a coding-agent session is kept (docs/traces.md, "What is kept"): bounded per
step and per session, within the corpus limits (`lifecycle/limits.py`: 2,000 steps, 256 KiB a
step, 8 MiB of steps, 64 KiB of meta), so a session of any length imports. Pure."""

import json

TASK_CHARS = 20_000
# A step's output or error: its head and its tail (a traceback ends with what went wrong).
HEAD_CHARS = 1_000
TAIL_CHARS = 3_000
TEXT_CHARS = HEAD_CHARS + TAIL_CHARS
# One string inside a tool call's arguments (a file written whole, a long patch).
ARGUMENT_CHARS = 2_000
MAX_STEPS = 1_000
MAX_RECOVERIES = 50
SIGNATURE_ATOMS = 64
META_BYTES = 60 * 1024


def clip(text: str) -> str:
    if len(text) <= TEXT_CHARS:
        return text
    cut = len(text) - TEXT_CHARS
    return f"{text[:HEAD_CHARS]}\n[… {cut} characters cut …]\n{text[-TAIL_CHARS:]}"


def clip_value(value: object) -> object:
    if isinstance(value, str):
        if len(value) <= ARGUMENT_CHARS:
            return value
        return f"{value[:ARGUMENT_CHARS]}[… {len(value) - ARGUMENT_CHARS} characters cut …]"
    if isinstance(value, list):
        return [clip_value(v) for v in value]
    if isinstance(value, dict):
        return {k: clip_value(v) for k, v in value.items()}
    return value


def fit_meta(trajectory: dict) -> dict:
    """Meta within its limit: the commands of the fixes go first, then recoveries from the end."""
    meta = trajectory["meta"]
    while len(json.dumps(meta, ensure_ascii=False).encode()) > META_BYTES:
        recoveries = meta.get("recoveries") or []
        with_commands = [r for r in recoveries if r.get("fix_commands")]
        if with_commands:
            for r in with_commands:
                r["fix_commands"] = []
        elif recoveries:
            meta["recoveries"] = recoveries[: len(recoveries) // 2]
        else:
            meta["source"] = {k: str(v)[:200] for k, v in list(meta["source"].items())[:20]}
            break
    return trajectory
