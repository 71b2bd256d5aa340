"""Inspect AI eval logs (semantics §19): the JSON log (`.json`) and the zipped log (`.eval`:
`header.json` plus one `samples/<id>_epoch_<n>.json` per sample), read as documented.

Mapping: one trajectory per sample and epoch; the task is the sample's `input` (a string or
chat messages); steps are `tool` events (`function`, `arguments`, `result`, `error`
`{type, message}`), or — in logs without events — the assistant messages' `tool_calls` with
their `tool` replies; metrics are the sample's `scores` (`C`/`I`/`P`/`N` as Inspect scores
them: 1, 0, 0.5, 0); the sample fails when it has an `error`, or when its first scorer's value
is below 0.5. `attachment://` references are resolved from the sample's `attachments`.
"""

import io
import json
import zipfile

from . import model
from .derive import as_text
from .model import RecordError, TraceRejected

LETTER_SCORES = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
ATTACHMENT = "attachment://"


def score_number(value: object) -> float | None:
    if isinstance(value, str) and value.strip().upper() in LETTER_SCORES:
        return LETTER_SCORES[value.strip().upper()]
    return model.score_value(value)


def _resolve(value: object, attachments: dict) -> object:
    if isinstance(value, str) and value.startswith(ATTACHMENT):
        return attachments.get(value[len(ATTACHMENT) :], value)
    if isinstance(value, list):
        return [_resolve(v, attachments) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, attachments) for k, v in value.items()}
    return value


def _content_text(content: object) -> str:
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return as_text(content)


def _steps_from_events(events: list) -> list[dict]:
    out = []
    for event in events:
        if not isinstance(event, dict) or event.get("event") != "tool":
            continue
        error = event.get("error")
        out.append(
            model.step(
                tool=str(event.get("function") or "tool"),
                arguments=event.get("arguments"),
                output=_content_text(event.get("result")),
                error=as_text(error) if error else "",
                failed=bool(error),
                call_id=event.get("id"),
                started_at=model.iso_time(event.get("timestamp")),
            )
        )
    return out


def _steps_from_messages(messages: list) -> list[dict]:
    replies = {
        m.get("tool_call_id"): m
        for m in messages
        if isinstance(m, dict) and m.get("role") == "tool"
    }
    out = []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            reply = replies.get(call.get("id"), {})
            error = reply.get("error")
            out.append(
                model.step(
                    tool=str(call.get("function") or "tool"),
                    arguments=call.get("arguments"),
                    output=_content_text(reply.get("content")),
                    error=as_text(error) if error else "",
                    failed=bool(error),
                    call_id=call.get("id"),
                )
            )
    return out


def _scores(sample: dict) -> tuple[dict, dict, float | None]:
    metrics, unscored, verdict = {}, {}, None
    for scorer, score in (sample.get("scores") or {}).items():
        value = score.get("value") if isinstance(score, dict) else score
        values = value if isinstance(value, dict) else {scorer: value}
        for name, item in values.items():
            key = model.metric_name(name if isinstance(value, dict) else scorer)
            number = score_number(item)
            if number is None:
                unscored[key] = item
            else:
                metrics[key] = number
                verdict = number if verdict is None else verdict
    return metrics, unscored, verdict


def sample_trajectory(sample: dict, header: dict) -> dict:
    sample = _resolve(sample, sample.get("attachments") or {})
    spec = header.get("eval") or {}
    eval_id = str(spec.get("eval_id") or spec.get("run_id") or "")
    task = str(spec.get("task") or "")
    sample_id, epoch = sample.get("id"), sample.get("epoch", 1)
    events = sample.get("events") or []
    steps = _steps_from_events(events) or _steps_from_messages(sample.get("messages") or [])
    metrics, unscored, verdict = _scores(sample)
    error = sample.get("error")
    root_failed = True if error else (None if verdict is None else verdict < 0.5)
    source = {k: v for k, v in sample.items() if k != "attachments"}
    return model.build(
        id=model.trajectory_id("inspect", f"{task}-{sample_id}-e{epoch}-{eval_id[:8]}"),
        task=model.message_text(sample.get("input")),
        steps=steps,
        metrics=metrics,
        unscored=unscored,
        root_failed=root_failed,
        root_message=as_text(error.get("message") if isinstance(error, dict) else error),
        session_id=f"{eval_id}:{sample_id}:{epoch}",
        started_at=model.iso_time(
            (events[0] if events else {}).get("timestamp") or spec.get("created")
        ),
        source={
            "eval": {
                k: spec.get(k) for k in ("eval_id", "run_id", "task", "task_id", "model", "created")
            },
            "sample": source,
        },
        source_format="inspect",
        extensions=(sample.get("metadata") or {}).get("cauterweb") or {},
    )


def _zipped(body: bytes, errors: list[RecordError]) -> tuple[dict, list[tuple[str, object]]]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(body))
        header = json.loads(archive.read("header.json"))
        names = sorted(
            n for n in archive.namelist() if n.startswith("samples/") and n.endswith(".json")
        )
        return header, [(n, json.loads(archive.read(n))) for n in names]
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        errors.append(RecordError("file", "", f"not an Inspect .eval log: {exc}"))
        return {}, []


def parse(body: bytes | str) -> list[dict]:
    errors: list[RecordError] = []
    if isinstance(body, bytes) and body[:4] == b"PK\x03\x04":
        header, samples = _zipped(body, errors)
    else:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
        try:
            header = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TraceRejected(
                [RecordError("file", "", f"not valid JSON: {exc.msg} at line {exc.lineno}")]
            ) from None
        if not isinstance(header, dict) or not isinstance(header.get("samples"), list):
            raise TraceRejected(
                [RecordError("file", "samples", "an Inspect eval log needs a list 'samples'")]
            )
        samples = [(f"samples[{i}]", s) for i, s in enumerate(header["samples"])]
    out = []
    for where, sample in samples:
        if not isinstance(sample, dict):
            errors.append(RecordError(where, "", "a sample must be an object"))
            continue
        if sample.get("id") in (None, ""):
            errors.append(RecordError(where, "id", "is required"))
            continue
        if not model.message_text(sample.get("input")).strip():
            errors.append(RecordError(f"{where} (sample {sample['id']})", "input", "is required"))
            continue
        out.append(sample_trajectory(sample, header))
    if not out and not errors:
        errors.append(RecordError("file", "samples", "the log has no samples"))
    if errors:
        raise TraceRejected(errors)
    return out
