"""Steps a user takes in JupyterLab, in Playwright terms, on JupyterLab's own DOM."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

KERNEL_TIMEOUT = 90_000
RUN_TIMEOUT = 180_000
PROMPT_DONE = re.compile(r"\[\d+\]")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def unavailable(reason: str) -> None:
    """Something the browser tests need is missing: a failure in CI, a skip (one line) elsewhere."""
    if in_ci():
        pytest.fail(f"browser tests cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


def open_notebook(page: Any, lab: Any, name: str) -> Any:
    """Open `name` (in the server's root folder) in a fresh workspace of its own, and wait until its
    kernel is idle; the notebook panel."""
    workspace = re.sub(r"[^A-Za-z0-9-]+", "-", Path(name).stem)
    page.goto(f"{lab.url}/lab/workspaces/{workspace}/tree/{name}?reset&token={lab.token}")
    panel = page.locator(".jp-NotebookPanel").filter(has=page.locator(".jp-Notebook")).first
    panel.locator(".jp-Notebook .jp-Cell").first.wait_for()
    wait_idle(page)
    return panel


def wait_idle(page: Any, timeout: float = KERNEL_TIMEOUT) -> None:
    """Until the current notebook's kernel is connected and idle (the server runs with
    `expose_app_in_browser`, so the page can ask JupyterLab itself), and the toolbar says so."""
    page.wait_for_function(
        """() => {
            const kernel = window.jupyterapp?.shell?.currentWidget?.sessionContext?.session?.kernel;
            return !!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
        }""", timeout=timeout)
    page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator[data-status="idle"]'
                 ).first.wait_for(timeout=timeout)


def cell(page: Any, index: int) -> Any:
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell").nth(index)


def run_cell(page: Any, index: int, wait: bool = True, timeout: float = 60_000) -> Any:
    """Select cell `index` (command mode) and run it with Shift+Enter; with `wait`, until its prompt shows [n]."""
    target = cell(page, index)
    target.locator(".jp-InputArea-prompt").click()
    page.keyboard.press("Shift+Enter")
    if wait:
        wait_done(target, timeout)
    return target


def wait_done(target: Any, timeout: float = RUN_TIMEOUT) -> None:
    prompt = target.locator(".jp-InputArea-prompt")
    prompt.filter(has_text=PROMPT_DONE).wait_for(timeout=timeout)


def output_text(target: Any) -> str:
    return str(target.locator(".jp-OutputArea").inner_text())


def open_jobs_panel(page: Any) -> Any:
    """Click the Training Jobs tab of the left sidebar; the panel."""
    tab = page.locator('.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="vertex-train-jobs"]')
    panel = page.locator("#vertex-train-jobs")
    if not panel.is_visible():
        tab.click()
    panel.wait_for(state="visible")
    return panel


def notebook(path: Path, *cells: str) -> Path:
    """A notebook of code cells with the python3 kernel, written to `path`."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nbformat.write(nb, str(path))
    return path

