"""What a notebook user relies on, with a real kernel where it matters: a failed job fails its cell
(and "Run All" stops), replicas run with the submitting kernel's Python and only the environment
Vertex AI would give them, and progress bars fold into the lines they update."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.manager import start_new_kernel
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from conftest import pool, processes_of_job, wait_for
from jupyter_ext import launch
from jupyter_ext.service import daemon

FAILING = """\
import json, os, sys
task = json.loads(os.environ["CLUSTER_SPEC"])["task"]
print("running", task["type"], flush=True)
if task["type"] == "workerpool1":
    sys.exit(3)
import time; time.sleep(60)
"""


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path) -> Path:
    return module_home


def _notebook(*cells: str) -> Any:
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])


def test_a_failed_job_fails_its_cell_and_run_all_stops(tmp_path: Path) -> None:
    book = _notebook("%load_ext jupyter_ext", f"%%vertex_train --workers 1 --name fails-the-cell job\n{FAILING}",
                     "print('the next cell ran')")
    with pytest.raises(CellExecutionError):
        NotebookClient(book, timeout=300, kernel_name="python3").execute(cwd=str(tmp_path))
    errors = [out for out in book.cells[1].outputs if out.output_type == "error"]
    assert [e.ename for e in errors] == ["JobFailedError"]
    assert "FAILED: replica workerpool1-0 exited with code 3; its log: " in errors[0].evalue
    assert len(errors[0].traceback) == 1  # one short line, no frames
    assert book.cells[2].outputs == [] and book.cells[2].execution_count is None  # not run


def test_with_no_wait_the_cell_succeeds(tmp_path: Path) -> None:
    book = _notebook("%load_ext jupyter_ext",
                     f"%%vertex_train --workers 1 --name no-wait --no-wait job\n{FAILING}", "print(job.id)")
    NotebookClient(book, timeout=300, kernel_name="python3").execute(cwd=str(tmp_path))
    job_id = book.cells[2].outputs[0].text.strip()
    assert launch.attach(job_id).wait(120) == "JOB_STATE_FAILED"


def test_a_saved_notebook_keeps_what_the_views_showed(tmp_path: Path) -> None:
    """Where widgets do not render (a saved notebook on GitHub, nbconvert, papermill), each view's text says
    what it showed: a re-attached ended job its state and lines, a --no-wait job its state at launch."""
    book = _notebook("%load_ext jupyter_ext", "%%vertex_train --name saved job\nprint('hello from the trainer')",
                     "%vertex_logs {job.id}", "%%vertex_train --name later --no-wait\nprint('later')")
    NotebookClient(book, timeout=300, kernel_name="python3").execute(cwd=str(tmp_path))

    def saved_text(cell: Any) -> str:
        return next(out.data["text/plain"] for out in cell.outputs if "text/plain" in out.get("data", {}))

    reattached = saved_text(book.cells[2]).splitlines()
    assert reattached[0].endswith(" SUCCEEDED") and "[workerpool0-0] hello from the trainer" in reattached
    assert saved_text(book.cells[3]).split()[1] in ("QUEUED", "PENDING", "RUNNING", "SUCCEEDED")


def test_replicas_run_with_the_kernels_python_whoever_started_the_service(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The service starts from this interpreter; a kernel of another virtual environment submits."""
    venv = tmp_path / "other-env"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    kernels = tmp_path / "jupyter" / "kernels" / "other-env"
    kernels.mkdir(parents=True)
    modules = tmp_path / "kernel-modules"  # on the kernel's import path only
    modules.mkdir()
    (modules / "only_in_the_kernel.py").write_text("WHERE = 'found'\n")
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "env": {"PYTHONPATH": str(modules)}, "display_name": "other env", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    daemon.ensure_running()
    book = _notebook("%load_ext jupyter_ext", "%%vertex_train --workers 1 --name which-python job\n"
                     "import sys\nimport only_in_the_kernel\n"
                     "print(sys.executable, sys.prefix, only_in_the_kernel.WHERE)",
                     "print(job.id, job.state)", "%%vertex_train --dry-run --name which-python-dry dry\npass")
    NotebookClient(book, timeout=300, kernel_name="other-env").execute(cwd=str(tmp_path))
    job_id, state = book.cells[2].outputs[0].text.split()
    assert state == "JOB_STATE_SUCCEEDED"
    handle = launch.attach(job_id)
    lines = {record.task_name: record.text for record in handle.logs()}
    assert lines == {"workerpool0-0": f"{python} {venv} found", "workerpool1-0": f"{python} {venv} found"}
    assert json.loads((handle.local_dir / "status.json").read_text())["python"] == str(python)  # the job says which
    assert f"Process replicas run with {python}; import path {modules}" in json.dumps(book.cells[3].outputs)


def test_replicas_get_only_what_vertex_would_give_and_what_the_user_passes(ipython: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    daemon.stop()  # a service of its own, with a variable only it has
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "the-servers-own")
    daemon.ensure_running()
    monkeypatch.delenv("JUPYTERHUB_API_TOKEN")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/home/me/key.json")  # the kernel's: not passed either
    monkeypatch.setenv("FROM_THE_KERNEL", "kept")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:4443")  # the kernel's Cloud Storage stand-in
    ipython.run_cell_magic("vertex_train", "--workers 1 --name clean-env --env MY_SETTING=42 --env FROM_THE_KERNEL "
                           "job", "import json, os\nprint(json.dumps(dict(os.environ)))")
    records = list(ipython.user_ns["job"].logs())
    assert sorted(record.task_name for record in records) == ["workerpool0-0", "workerpool1-0"]
    for record in records:
        env = json.loads(record.text)
        assert "JUPYTERHUB_API_TOKEN" not in env and "GOOGLE_APPLICATION_CREDENTIALS" not in env
        assert env["MY_SETTING"] == "42" and env["FROM_THE_KERNEL"] == "kept"
        assert env["STORAGE_EMULATOR_HOST"] == "http://127.0.0.1:4443"
        assert {"PATH", "HOME", "CLUSTER_SPEC", "CLOUD_ML_JOB_ID"} <= set(env)


def test_a_progress_bar_is_one_line_per_epoch_in_the_monitor() -> None:
    from widgets.monitor import JobMonitor

    handle = launch.submit({"displayName": "progress", "jobSpec": {"workerPoolSpecs": [
        pool(1, trainer="progress_bar.py")]}})
    monitor = JobMonitor(handle)
    assert monitor.wait() == "JOB_STATE_SUCCEEDED"
    shown = [line.text for line in monitor.buffer.lines("workerpool0-0")]
    assert shown == ["Epoch 1/2", f"200/200 [{'=' * 30}] - 1s 5ms/step - loss: 0.0050",
                     "Epoch 2/2", f"200/200 [{'=' * 30}] - 1s 5ms/step - loss: 0.0025"]
    # the replica's own tab too, though never opened: a saved notebook keeps what each tab holds
    assert "Epoch 2/2" in monitor._views["workerpool0-0"].value
    raw = (handle.local_dir / "logs" / "workerpool0-0.log").read_bytes().split(b"\n")
    assert raw[1].count(b"\r") == 200 and raw[1].count(b"\b") > 200 * 30  # the file keeps what was written


def test_vtrain_notebook_stops_at_a_failed_job_and_exits_1(tmp_path: Path) -> None:
    from conftest import vtrain

    path = tmp_path / "fails.ipynb"
    nbformat.write(_notebook("%load_ext jupyter_ext", f"%%vertex_train --workers 1 --name cli-fails job\n{FAILING}",
                             "print('the next cell ran')"), str(path))
    done = vtrain("notebook", str(path), "--output", str(tmp_path / "out.ipynb"), timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "(cli-fails): FAILED" in done.stdout
    assert "error in cell 2: JobFailedError: CustomJob" in done.stdout
    executed = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4)
    assert executed.cells[2].execution_count is None  # as "Run All": nothing after the failed cell


def test_vtrain_notebook_exits_0_when_the_notebook_catches_its_failed_job(tmp_path: Path) -> None:
    """As lesson 04 does: a job that fails on purpose, its error caught and explained."""
    from conftest import vtrain

    path = tmp_path / "catches.ipynb"
    nbformat.write(_notebook("%load_ext jupyter_ext",
                             f"%%vertex_train --workers 1 --name fails-on-purpose --no-wait failed\n{FAILING}",
                             "from jupyter_ext.errors import JobFailedError\ntry:\n    failed.result(timeout=120)\n"
                             "except JobFailedError as error:\n    print('as expected:', error)"), str(path))
    done = vtrain("notebook", str(path), "--output", str(tmp_path / "out.ipynb"), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(fails-on-purpose): FAILED" in done.stdout
    executed = nbformat.read(str(tmp_path / "out.ipynb"), as_version=4)
    assert "as expected: CustomJob" in executed.cells[2].outputs[0].text


def test_the_cells_line_expands_notebook_variables_in_a_kernel(tmp_path: Path) -> None:
    """As IPython does for every magic: `{expression}` and `$name` in the `%%vertex_train` line."""
    book = _notebook("%load_ext jupyter_ext", "name, workers = 'from-a-variable', 2",
                     "%%vertex_train --dry-run --workers $workers --name {name + '-x'} job\nprint('hi')")
    NotebookClient(book, timeout=300, kernel_name="python3").execute(cwd=str(tmp_path))
    shown = json.dumps(book.cells[2].outputs)
    assert "from-a-variable-x" in shown and "workerpool1-1" in shown


def test_interrupting_the_kernel_stops_the_waiting_and_the_job_goes_on(tmp_path: Path) -> None:
    kernel, client = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:
        client.execute_interactive("%load_ext jupyter_ext", timeout=60)
        cell = client.execute("%%vertex_train --workers 1 --name outlives-the-wait job\n"
                              "import time\nprint('training', flush=True)\ntime.sleep(600)\n")


        def running() -> str | None:
            found = [j for j in launch.list_jobs() if j.display_name == "outlives-the-wait"]
            return found[0].name.rsplit("/", 1)[1] if found and found[0].state.name == "JOB_STATE_RUNNING" else None
        job_id = wait_for(running, 120, "the job to run")
        kernel.interrupt_kernel()
        outputs = []
        while (message := client.get_iopub_msg(timeout=60))["msg_type"] != "status" or \
                message["parent_header"].get("msg_id") != cell or message["content"]["execution_state"] != "idle":
            if message["parent_header"].get("msg_id") == cell and message["msg_type"] == "stream":
                outputs.append(message["content"]["text"])
        assert "stopped waiting; the job goes on" in "".join(outputs)
        handle = launch.attach(job_id)
        assert handle.state == "JOB_STATE_RUNNING" and len(processes_of_job(job_id)) == 2
        handle.cancel()
        assert handle.wait(60) == "JOB_STATE_CANCELLED"
    finally:
        client.stop_channels()
        kernel.shutdown_kernel(now=True)
