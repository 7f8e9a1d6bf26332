"""Fixtures for the browser tests: a JupyterLab of this environment, started on 127.0.0.1 with its
own workbench data folder, driven by Debian's Chromium (headless) through Playwright.

- `lab` (session): the running server (url, token, root_dir, vtrain_home); at the end the server is
  stopped, and the local service the session's jobs started (`vtrain service stop`).
- `browser` (session): Chromium from /usr/bin/chromium (or $VTRAIN_CHROMIUM); never downloaded.
- `page`: a fresh page, signed in, and a `shot("step")` helper that saves
  tests/browser/output/<test name>/NN-step.png.

Under CI=true a missing browser, Playwright or JupyterLab, or a JupyterLab without this project's
extensions, fails the tests; elsewhere they skip with a one-line reason.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from .lab_steps import unavailable

OUTPUT = Path(__file__).resolve().parent / "output"
CHROMIUM = os.environ.get("VTRAIN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
START_TIMEOUT = 120.0
# JupyterLab settings for a quiet, deterministic page: no news toast, every cell in the DOM
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                       "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


@dataclass
class Lab:
    url: str  # http://127.0.0.1:PORT
    token: str
    root_dir: Path
    vtrain_home: Path
    log_path: Path

    def api(self, path: str, method: str = "GET") -> tuple[int, Any]:
        request = urllib.request.Request(f"{self.url}/{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def page_config(self) -> dict[str, Any]:
        """The page config JupyterLab serves with /lab: which federated extensions it loads, etc."""
        request = urllib.request.Request(f"{self.url}/lab", headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
        found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', text, re.S)
        return json.loads(found.group(1)) if found else {}

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="package")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        unavailable("JupyterLab is not installed (pip install 'jupyterlab>=4')")
    base = tmp_path_factory.mktemp("lab")
    root, home = base / "root", base / "vtrain"
    settings = base / "settings"
    for folder in (root, home, settings, base / "config", base / "data", base / "runtime", base / "workspaces"):
        folder.mkdir()
    for file, values in LAB_SETTINGS.items():
        (settings / file).parent.mkdir(parents=True, exist_ok=True)
        (settings / file).write_text(json.dumps(values))
    env = {**os.environ, "VTRAIN_HOME": str(home), "JUPYTER_CONFIG_DIR": str(base / "config"),
           "JUPYTER_DATA_DIR": str(base / "data"), "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
           "PYTHONUNBUFFERED": "1"}
    token, port = secrets.token_hex(24), _free_port()
    log_path = base / "jupyterlab.log"
    log = open(log_path, "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
         f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = Lab(f"http://127.0.0.1:{port}", token, root, home, log_path)
    try:
        _wait_until_up(server, process)
        _check_extensions(server)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        # the local service the session's jobs started runs detached: stop it
        subprocess.run([sys.executable, "-m", "jupyter_ext.cli", "service", "stop"], env=env, capture_output=True,
                       timeout=120)


def _wait_until_up(server: Lab, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"jupyter lab exited with {process.returncode}:\n{server.log_tail()}", pytrace=False)
        try:
            if server.api("api/status")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.25)
    pytest.fail(f"jupyter lab did not answer in {START_TIMEOUT:g} s:\n{server.log_tail()}", pytrace=False)


def _check_extensions(server: Lab) -> None:
    """Both halves installed as a user gets them: the server routes and the built front end."""
    code, _ = server.api("vertex-train/jobs")
    if code != 200:
        unavailable(f"the jupyter_ext server extension is not enabled (GET vertex-train/jobs: {code}); "
                    "install the project with pip")
    names = [e.get("name") for e in server.page_config().get("federated_extensions", [])]
    if "jupyter-vertex-train" not in names:
        unavailable("the jupyter-vertex-train lab extension is not installed (the front end is built by "
                    "`pip install .` when node is present; see `jupyter labextension list`)")


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("Playwright is not installed (pip install playwright; the browser is Debian's chromium)")
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Shots:
    """Numbered screenshots of a test's steps: output/<test name>/NN-step.png."""

    def __init__(self, page: Any, folder: Path) -> None:
        self.page, self.folder, self.count = page, folder, 0

    def __call__(self, step: str) -> Path:
        self.count += 1
        path = self.folder / f"{self.count:02d}-{re.sub(r'[^A-Za-z0-9_.-]+', '-', step)}.png"
        self.page.screenshot(path=str(path))
        return path


@pytest.fixture
def output_dir(request: pytest.FixtureRequest) -> Path:
    """tests/browser/output/<test name>/, emptied."""
    folder = OUTPUT / re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
def page(browser: Any, lab: Lab, output_dir: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    folder = output_dir
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    context.set_default_timeout(60_000)
    tab = context.new_page()
    console: list[str] = []
    tab.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    tab.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    yield tab
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        try:
            tab.screenshot(path=str(folder / "99-failure.png"))
        except Exception:
            pass
        (folder / "console.log").write_text("\n".join(console))
    context.close()


@pytest.fixture
def shot(page: Any, output_dir: Path) -> Shots:
    """`shot("step")` saves output/<test name>/NN-step.png."""
    return Shots(page, output_dir)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
