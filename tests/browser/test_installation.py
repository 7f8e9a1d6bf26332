"""The installation as a user checks it: `jupyter labextension list` and `jupyter server extension list`
say the front end and the server extension are enabled and OK (no `jupyter labextension install`)."""

from __future__ import annotations

import re
import subprocess
import sys

from .lab_steps import unavailable

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _jupyter(app: str) -> str:
    """`jupyter <app> list` of this environment's Python (what the jupyter-<app> scripts run)."""
    apps = {"labextension": "from jupyterlab.labextensions import LabExtensionApp as App",
            "server extension": "from jupyter_server.extension.serverextension import ServerExtensionApp as App"}
    try:
        done = subprocess.run([sys.executable, "-c", f"{apps[app]}; App.launch_instance()", "list"],
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AssertionError(f"jupyter {app} list: {exc}") from None
    return ANSI.sub("", done.stdout + done.stderr)


def test_jupyter_labextension_list_shows_the_panel_enabled_and_ok() -> None:
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        unavailable("JupyterLab is not installed (pip install 'jupyterlab>=4')")
    text = _jupyter("labextension")
    if "jupyter-vertex-train" not in text:
        unavailable("the jupyter-vertex-train lab extension is not installed (the front end is built by "
                    "`pip install .` when node is present)")
    assert re.search(r"jupyter-vertex-train v\S+ enabled\s+OK \(python, vertex-train-workbench\)", text), text


def test_jupyter_server_extension_list_shows_jupyter_ext_enabled_and_ok() -> None:
    text = _jupyter("server extension")
    assert re.search(r"^\s*jupyter_ext enabled\s*$", text, re.M), text
    assert re.search(r"^\s*jupyter_ext \S+ OK\s*$", text, re.M), text
