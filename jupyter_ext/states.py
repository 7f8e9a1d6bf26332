"""Job states as the Vertex AI API names them, and what follows from a state.

The API's JobState names (`JOB_STATE_RUNNING`), the runner's short forms
(`RUNNING`), which states are final, and the exit code a command ends with.
Imports nothing heavy: the CLI uses it before any client is loaded.
"""

from __future__ import annotations

from typing import Any

PREFIX = "JOB_STATE_"
FINAL = ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")
EXIT_CODES = {"JOB_STATE_SUCCEEDED": 0, "JOB_STATE_FAILED": 1, "JOB_STATE_CANCELLED": 130}


def name(state: Any) -> str:
    """The API's name of a state given as `RUNNING`, `JOB_STATE_RUNNING` or a JobState enum."""
    text = str(getattr(state, "name", state)).upper()
    return text if text.startswith(PREFIX) else PREFIX + text


def short(state: Any) -> str:
    """`RUNNING` for any form of a state."""
    return name(state).removeprefix(PREFIX)


def is_final(state: Any) -> bool:
    return name(state) in FINAL


def exit_code(state: Any) -> int:
    """What `vtrain run`, `submit --follow` and `tune` exit with: 0, 1 when failed, 130 when cancelled."""
    return EXIT_CODES.get(name(state), 1)
