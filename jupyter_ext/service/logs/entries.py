"""One replica log line as the LogEntry Vertex AI writes for it (proto3 JSON, `resource.type="ml_job"`).

A line holding a JSON object becomes `jsonPayload`, unless it nests deeper than MAX_PAYLOAD_DEPTH
(the clients' protobuf parsers stop at 100 levels): then, like any other line, `textPayload`.
"""

from __future__ import annotations

import json
from typing import Any

from ...api import LOG_RESOURCE_TYPE, TASK_LABEL, TRIAL_LABEL
from ...runner.logs import LogLine
from .query import SEVERITIES, Entry

MAX_PAYLOAD_DEPTH = 64


def _json_object(text: str) -> dict | None:
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        value = json.loads(text, parse_constant=_reject)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) and _depth(value) <= MAX_PAYLOAD_DEPTH else None


def _depth(value: Any) -> int:
    """How deep objects and arrays nest in a JSON value (without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _reject(name: str) -> None:
    raise ValueError(name)  # NaN and Infinity are not JSON


def line_to_entry(job_id: str, project: str, task_name: str, offset: int, line: LogLine,
                  trial: str | None = None) -> Entry:
    """A LogEntry as Vertex AI writes a replica's output line. `offset` is the line's end in its file:
    insertId `<task>[-<trial>]-<offset, 12 digits>` sorts like the entries of one timestamp."""
    labels = {TASK_LABEL: task_name}
    if trial is not None:
        labels[TRIAL_LABEL] = trial
    entry: Entry = {
        "logName": f"projects/{project}/logs/ml.googleapis.com%2F{job_id}",
        "resource": {"type": LOG_RESOURCE_TYPE,
                     "labels": {"job_id": job_id, "task_name": task_name, "project_id": project}},
        "timestamp": line.timestamp,
        "receiveTimestamp": line.timestamp,
        "severity": "ERROR" if line.stream == "stderr" else "INFO",
        "insertId": f"{task_name}-{offset:012d}" if trial is None else f"{task_name}-{trial}-{offset:012d}",
        "labels": labels,
    }
    payload = _json_object(line.text)
    if payload is None:
        entry["textPayload"] = line.text
    else:
        level = payload.get("severity")
        if isinstance(level, str) and level.upper() in SEVERITIES:
            entry["severity"] = level.upper()
            del payload["severity"]  # Cloud Logging moves it out of the payload
        entry["jsonPayload"] = payload
    return entry
