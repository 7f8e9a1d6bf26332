"""A notebook cell that waits for its job while the job's view stays live.

Widget events (the monitor's Cancel button, its tabs and filter, the inspector) are
messages the kernel must handle while the cell runs. A kernel handles them only
between cells, or while an async cell awaits (ipykernel 7.4 dispatches widget
messages then). So in a kernel `load_ipython_extension` installs an input
transformer that turns a `%%vertex_train` cell into an awaited call of the magic
(`VertexTrainMagics.vertex_train_async`), which waits with `asyncio.sleep`: the
cell still blocks "Run All" until the job ends, and the view answers within a
second. Outside a kernel (an IPython terminal, tests) the magic waits plainly.

Interrupting the kernel stops the waiting; the job goes on.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

POLL = 0.1  # seconds between looks at the view while waiting
PREFIX = "%%vertex_train"


def install(shell: Any, magics: Any) -> None:
    """In a kernel: `%%vertex_train` cells become awaited, so widget events are handled while they wait."""
    if getattr(shell, "kernel", None) is None or not shell.autoawait:
        return
    shell.user_ns["__vertex_train__"] = magics.vertex_train_async
    if _awaited not in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.append(_awaited)


def _awaited(lines: list[str]) -> list[str]:
    """`%%vertex_train LINE` + BODY as `await __vertex_train__(LINE, BODY)`."""
    if not lines or not lines[0].startswith(PREFIX) or lines[0][len(PREFIX):len(PREFIX) + 1] not in (" ", "\n", ""):
        return lines
    line = lines[0][len(PREFIX):].strip()
    return [f"await __vertex_train__({line!r}, {''.join(lines[1:])!r})\n"]


def wait(view: Any) -> bool:
    """Block until `view` (a JobMonitor or TuningMonitor) has seen its job end; False when interrupted."""
    try:
        while not view.finished:
            time.sleep(POLL)
    except KeyboardInterrupt:
        return False
    return True


async def wait_async(view: Any) -> bool:
    """The same, awaiting: the kernel handles widget events meanwhile."""
    try:
        while not view.finished:
            await asyncio.sleep(POLL)
    except (KeyboardInterrupt, asyncio.CancelledError):
        return False
    return True
