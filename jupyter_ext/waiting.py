"""A notebook cell that waits for its job while the job's view stays live.

Widget events (the monitor's Cancel button, its tabs and filter, the inspector) are
messages the kernel must handle while the cell runs. A kernel handles them only
between cells, or while an async cell awaits (ipykernel 7.4 dispatches widget
messages then). So in a kernel `load_ipython_extension` installs an input
transformer that turns a `%%vertex_train` cell into an awaited call of the magic
(`VertexTrainMagics.vertex_train_async`), which waits with `asyncio.sleep`: the
cell still blocks "Run All" until the job ends, and the view answers within a
second (ipykernel does not say `idle` for widget messages it handles meanwhile, which the
widgets' front end waits for before it sends a widget's next change: `install` adds that).
Outside a kernel (an IPython terminal, tests) the magic waits plainly.

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
    _say_idle_after_widget_messages(shell.kernel)


def _say_idle_after_widget_messages(kernel: Any) -> None:
    """ipykernel handles a widget's message while a cell awaits ("concurrently") but publishes no
    status for it, and the widgets' front end sends a widget's next change only once the kernel
    said `idle` for the previous one: a second click or keystroke would wait for the cell to end.
    So each such message ends with `idle` for it, then `busy` again for the cell that still runs."""
    dispatch = kernel.dispatch_shell
    if getattr(dispatch, "says_idle", False):
        return

    async def dispatch_shell(msg: Any, /, subshell_id: str | None = None, *, concurrent: bool = False) -> None:
        cell = kernel.get_parent("shell")
        try:
            await dispatch(msg, subshell_id=subshell_id, concurrent=concurrent)
        finally:
            if concurrent:
                kernel._publish_status("idle", "shell", parent=kernel.get_parent("shell"))
                kernel._publish_status("busy", "shell", parent=cell)

    dispatch_shell.says_idle = True  # type: ignore[attr-defined]
    kernel.dispatch_shell = dispatch_shell


def _awaited(lines: list[str]) -> list[str]:
    """`%%vertex_train LINE` + BODY as `await __vertex_train__(LINE, BODY)`, LINE's `$name` and `{expr}`
    expanded in the notebook's namespace when the cell runs, as IPython does for any magic's line."""
    if not lines or not lines[0].startswith(PREFIX) or lines[0][len(PREFIX):len(PREFIX) + 1] not in (" ", "\n", ""):
        return lines
    line = lines[0][len(PREFIX):].strip()
    return [f"await __vertex_train__(get_ipython().var_expand({line!r}), {''.join(lines[1:])!r})\n"]


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
