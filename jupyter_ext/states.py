"""Job states as the Vertex AI API names them, and what follows from a state.

The API's JobState names (`JOB_STATE_RUNNING`), the runner's short forms
(`RUNNING`), which states are final, and the exit code a command ends with.
Imports nothing heavy: the CLI uses it before any client is loaded.
"""

from __future__ import annotations

from typing import Any

from .errors import WorkbenchError

PREFIX = "JOB_STATE_"
# JobState (v1) without JOB_STATE_UNSPECIFIED, in the API's order
SHORT_NAMES = ("QUEUED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLING", "CANCELLED", "PAUSED", "EXPIRED",
               "UPDATING", "PARTIALLY_SUCCEEDED")
FINAL = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")
EXIT_CODES = {"JOB_STATE_SUCCEEDED": 0, "JOB_STATE_FAILED": 1, "JOB_STATE_CANCELLED": 130}


def name(state: Any) -> str:
    """The API's name of a state given as `RUNNING`, `JOB_STATE_RUNNING` or a JobState enum."""
    text = str(getattr(state, "name", state)).upper()
    return text if text.startswith(PREFIX) else PREFIX + text


def short(state: Any) -> str:
    """`RUNNING` for any form of a state."""
    return name(state).removeprefix(PREFIX)


def list_filter(state: str | None) -> str:
    """The `filter` of a job listing for `--state` ("": every job); a state the API does not have is
    one line naming the flag, not the service's 400 about a filter the user did not write."""
    if not state:
        return ""
    if short(state) not in SHORT_NAMES:
        raise WorkbenchError(f"--state: {state!r} is not a job state (valid: {', '.join(SHORT_NAMES)})")
    return f'state="{name(state)}"'


def is_final(state: Any) -> bool:
    return name(state) in FINAL


def exit_code(state: Any) -> int:
    """What `vtrain run`, `submit --follow` and `tune` exit with: 0, 1 when failed, 130 when cancelled."""
    return EXIT_CODES.get(name(state), 1)
