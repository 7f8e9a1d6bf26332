"""The workbench in JupyterLab, in headless Chromium, as a user sees it: the magic and the pool
configurator in a notebook, a local 3-replica job in the monitor and in the Training Jobs panel,
its live log view with per-replica tabs, TF_CONFIG and the PyTorch variables, and Cancel from the panel.

Screenshots of every step: tests/browser/output/<test name>/NN-step.png.
"""

from __future__ import annotations

import json
import re
from typing import Any

from playwright.sync_api import expect

from .lab_steps import cell, notebook, open_jobs_panel, open_notebook, output_text, run_cell, wait_done, wait_idle

TRAINER = """\
import json, os, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
for step in range(6):
    print(f"{task['type']}-{task['index']} step {step}", flush=True)
    time.sleep(0.5)
print(f"{task['type']}-{task['index']} epoch 1/2\\r{task['type']}-{task['index']} epoch 2/2", flush=True)
"""


def test_magic_dry_run_and_pool_configurator(page: Any, lab: Any, shot: Any) -> None:
    notebook(lab.root_dir / "pools.ipynb", "%load_ext jupyter_ext",
             f"%%vertex_train --workers 2 --dry-run --name browser-dry\n{TRAINER}")
    open_notebook(page, lab, "pools.ipynb")
    shot("notebook-open")

    run_cell(page, 0)
    dry = run_cell(page, 1)
    text = output_text(dry)
    assert "TF_CONFIG=" in text and "## workerpool1-1 (worker)" in text, text[:2000]
    shot("dry-run")

    # the notebook toolbar button inserts and runs `pools = vertex_pools(); pools`
    page.locator(".jp-NotebookPanel-toolbar .jp-VertexTrain-poolsButton").click()
    pools_cell = cell(page, 2)
    wait_done(pools_cell)
    assert "vertex_pools()" in pools_cell.locator(".jp-InputArea-editor").inner_text()
    machine = _machine_picker(pools_cell)
    machine.wait_for()
    preview = pools_cell.locator("pre", has_text="machine_spec").first
    before = preview.inner_text()
    assert "n1-standard-4" in before and "NVIDIA" not in before, before
    shot("pool-configurator")

    # pick a GPU machine for the primary: the JSON preview follows
    label = machine.evaluate("s => [...s.options].map(o => o.textContent).find(t => t.startsWith('a2-highgpu-1g'))")
    assert label, "no a2-highgpu-1g in the machine picker"
    machine.select_option(label=label)
    changed = pools_cell.locator("pre", has_text="a2-highgpu-1g").first  # the HTML widget redraws its <pre>
    changed.wait_for(timeout=30_000)
    after = json.loads(changed.inner_text())
    assert after[0]["machine_spec"]["machine_type"] == "a2-highgpu-1g"
    assert after[0]["machine_spec"]["accelerator_type"] == "NVIDIA_TESLA_A100", after[0]
    shot("gpu-machine-picked")

    # the command palette has the same command
    page.keyboard.press("Control+Shift+C")
    palette = page.locator("#command-palette")
    palette.locator("input").fill("Pool Configurator")
    item = palette.locator(".lm-CommandPalette-item", has_text="Open Vertex AI Pool Configurator")
    item.wait_for()
    shot("command-palette")
    item.click()
    wait_done(cell(page, 3))
    _machine_picker(cell(page, 3)).wait_for()
    shot("configurator-from-palette")


def _machine_picker(target: Any) -> Any:
    """The primary pool's "Machine type" dropdown of a PoolConfigurator in a cell's output."""
    return target.locator(".widget-dropdown", has=target.page.locator("label", has_text="Machine type")
                          ).first.locator("select")


def test_local_job_in_monitor_and_panel(page: Any, lab: Any, shot: Any) -> None:
    notebook(lab.root_dir / "job.ipynb", "%load_ext jupyter_ext",
             f"%%vertex_train --workers 2 --name browser-3\n{TRAINER}")
    open_notebook(page, lab, "job.ipynb")
    run_cell(page, 0)
    job_cell = run_cell(page, 1, wait=False)

    # lines arrive in the monitor while the job runs
    job_cell.locator(".jp-OutputArea", has_text="chief-0 step").wait_for(timeout=120_000)
    shot("monitor-lines-arriving")
    wait_done(job_cell, timeout=180_000)
    text = output_text(job_cell)
    for task in ("chief-0", "worker-0", "worker-1"):
        assert f"{task} step 5" in text, text[-2000:]
    assert "SUCCEEDED" in text
    shot("monitor-succeeded")

    # the sidebar panel shows it SUCCEEDED, with its replica count and duration
    panel = open_jobs_panel(page)
    row = panel.locator(".jp-VertexTrain-jobRow", has_text="browser-3").first
    row.locator('.jp-VertexTrain-state[data-state="JOB_STATE_SUCCEEDED"]').wait_for(timeout=30_000)
    assert row.locator(".jp-VertexTrain-replicas").get_attribute("data-count") == "3"
    assert re.fullmatch(r"\d\d:\d\d:\d\d", row.locator(".jp-VertexTrain-started").inner_text())
    assert re.fullmatch(r"\d+:\d\d", row.locator(".jp-VertexTrain-duration").inner_text())
    assert row.locator(".jp-VertexTrain-cancel").count() == 0  # nothing to cancel
    job_id = row.get_attribute("data-job-id")
    shot("panel-succeeded")

    # open it: per-replica tabs following the log, and each replica's TF_CONFIG
    row.click()
    view = page.locator(f'.jp-VertexTrain-jobView[data-job-id="{job_id}"]')
    view.wait_for()
    page.locator(f'.jp-VertexTrain-jobView[data-job-id="{job_id}"][data-logs-done="true"]').wait_for()
    tabs = view.locator(".lm-TabBar-tab").all_inner_texts()
    assert tabs == ["all", "workerpool0-0", "workerpool1-0", "workerpool1-1", "TF_CONFIG"], tabs
    all_log = view.locator('.jp-VertexTrain-log[data-replica="all"]')
    lines = all_log.locator(".jp-VertexTrain-line").all_inner_texts()
    for task in ("chief-0", "worker-0", "worker-1"):
        assert sum(f"{task} step" in line for line in lines) == 6, lines
        assert any(line.endswith(f"{task} epoch 2/2") for line in lines), lines  # folded as the monitor does
    assert not any("1/2" in line for line in lines), lines
    colours = {n.get_attribute("style") for n in all_log.locator(".jp-VertexTrain-replica").all()}
    assert len(colours) == 3  # one colour per replica, as in the monitor
    shot("job-view-all")
    view.locator(".lm-TabBar-tab", has_text="workerpool1-1").click()
    worker = view.locator('.jp-VertexTrain-log[data-replica="workerpool1-1"]')
    last = worker.locator(".jp-VertexTrain-line").all_inner_texts()[-2:]
    assert last[0].endswith("worker-1 step 5") and last[1].endswith("worker-1 epoch 2/2"), last
    shot("job-view-replica")
    view.locator(".lm-TabBar-tab", has_text="TF_CONFIG").click()
    env = view.locator(".jp-VertexTrain-env")
    env.locator(".jp-VertexTrain-tfConfig").first.wait_for()
    configs = [json.loads(str(node.get_attribute("data-tf-config")))
               for node in env.locator(".jp-VertexTrain-tfConfig").all()]
    assert [(c["task"]["type"], c["task"]["index"]) for c in configs] == [("chief", 0), ("worker", 0), ("worker", 1)]
    assert len(configs[0]["cluster"]["worker"]) == 2 and configs[0]["job"]["workerPoolSpecs"]
    assert '"task": {' in env.locator(".jp-VertexTrain-tfConfig").first.inner_text()
    # next to TF_CONFIG, each replica's PyTorch variables: ranks in replica order, the primary as master
    pytorch = env.locator('.jp-VertexTrain-replicaEnv[data-replica="workerpool1-0"] .jp-VertexTrain-pytorch')
    assert pytorch.get_attribute("data-rank") == "1"
    lines = pytorch.inner_text().splitlines()
    assert "RANK=1" in lines and "WORLD_SIZE=3" in lines, lines
    assert f"MASTER_ADDR={configs[0]['cluster']['chief'][0].rsplit(':', 1)[0]}" in lines, lines
    shot("job-view-tf-config")

    # the same in JupyterLab's dark theme: the panel and the view use the theme's variables
    view.locator(".lm-TabBar-tab", has_text="all").click()
    _set_theme(page, "JupyterLab Dark")
    try:
        shot("dark-theme")
    finally:
        _set_theme(page, "JupyterLab Light")


def _set_theme(page: Any, theme: str) -> None:
    page.evaluate("theme => window.jupyterapp.commands.execute('apputils:change-theme', {theme})", theme)
    light = "true" if "Light" in theme else "false"
    page.locator(f'body[data-jp-theme-light="{light}"]').wait_for(state="attached")
    page.wait_for_timeout(500)  # the theme's stylesheet applies


def test_cancel_from_the_panel(page: Any, lab: Any, shot: Any) -> None:
    """A running job with --enable-web-access: its view says how to open a shell in each replica;
    the panel's Cancel stops it."""
    notebook(lab.root_dir / "cancel.ipynb", "%load_ext jupyter_ext",
             "%%vertex_train --workers 1 --name browser-cancel --enable-web-access --no-wait\n"
             "import time\nprint('started', flush=True)\ntime.sleep(600)\n")
    open_notebook(page, lab, "cancel.ipynb")
    run_cell(page, 0)
    run_cell(page, 1)
    panel = open_jobs_panel(page)
    row = panel.locator(".jp-VertexTrain-jobRow", has_text="browser-cancel").first
    row.locator('.jp-VertexTrain-state[data-state="JOB_STATE_RUNNING"]').wait_for(timeout=60_000)
    job_id = row.get_attribute("data-job-id")
    row.click()
    access = page.locator(f'.jp-VertexTrain-jobView[data-job-id="{job_id}"] .jp-VertexTrain-access')
    access.wait_for(timeout=30_000)
    assert access.locator("code").all_inner_texts() == [f"vtrain shell {job_id} --replica workerpool0-0",
                                                        f"vtrain shell {job_id} --replica workerpool1-0"]
    shot("running")
    row.locator(".jp-VertexTrain-cancel").click()
    row = panel.locator(".jp-VertexTrain-jobRow", has_text="browser-cancel").first
    row.locator('.jp-VertexTrain-state[data-state="JOB_STATE_CANCELLED"]').wait_for(timeout=60_000)
    access.wait_for(state="detached", timeout=30_000)  # nothing to enter once the job ended
    shot("cancelled")
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="cancel.ipynb").click()  # back to the notebook
    wait_idle(page)


def test_cancel_from_the_monitor_of_a_waiting_cell(page: Any, lab: Any, shot: Any,
                                                   monkeypatch: Any) -> None:
    """The cell waits for its job (the default); the monitor's Cancel still works meanwhile, the job
    is CANCELLED within 2 s, the cell ends with its one-line error, and no replica is left."""
    from datetime import datetime, timezone

    from conftest import processes_of_job
    from jupyter_ext import launch

    notebook(lab.root_dir / "waiting.ipynb", "%load_ext jupyter_ext",
             "%%vertex_train --workers 2 --name browser-waiting job\n"
             "import time\nprint('started', flush=True)\ntime.sleep(600)\n")
    open_notebook(page, lab, "waiting.ipynb")
    run_cell(page, 0)
    waiting = run_cell(page, 1, wait=False)
    cancel = waiting.locator(".jp-OutputArea button", has_text="Cancel")
    cancel.wait_for(timeout=60_000)
    waiting.locator(".jp-OutputArea", has_text="started").first.wait_for(timeout=60_000)
    assert waiting.locator(".jp-InputArea-prompt").inner_text().strip() == "[*]:"  # the cell still waits
    # the filter and the tabs answer within a second too: the kernel draws what they select
    shown = waiting.locator(".jp-OutputArea .widget-html-content:visible", has_text="started")
    expect(shown).to_have_count(1, timeout=60_000)  # the replicas' lines, in the "all" tab
    filter_box = waiting.locator(".jp-OutputArea input[placeholder='filter lines']")
    filter_box.fill("a line no replica printed")
    expect(shown).to_have_count(0, timeout=1_000)
    filter_box.fill("")
    expect(shown).to_have_count(1, timeout=1_000)
    waiting.locator(".jp-OutputArea .lm-TabBar-tab", has_text="workerpool1-1").click()
    # a replica's tab shows its own lines, without the replica's name before each
    expect(shown.filter(has_not_text="[workerpool")).to_have_count(1, timeout=1_000)
    # and the inspector: the replica picked is the one whose CLUSTER_SPEC the kernel draws
    waiting.locator(".jp-OutputArea .jupyter-widget-Collapse-header", has_text="TF_CONFIG and CLUSTER_SPEC").click()
    waiting.locator(".jp-OutputArea .widget-dropdown select").select_option("workerpool1-1")
    expect(waiting.locator(".jp-OutputArea", has_text="CLUSTER_SPEC of workerpool1-1").first).to_be_visible(
        timeout=1_000)
    shot("waiting")
    cancel.click()
    clicked = datetime.now(timezone.utc)
    wait_done(waiting)
    shot("cancelled")
    text = output_text(waiting)
    assert "JobFailedError" in text and "CANCELLED: cancelled by the user" in text
    job_id = re.search(r"CustomJob (\d+) \(browser-waiting\)", text)[1]  # type: ignore[index]
    monkeypatch.setenv("VTRAIN_HOME", str(lab.vtrain_home))  # the lab's own local service
    resource = launch.attach(job_id).resource
    assert resource.state.name == "JOB_STATE_CANCELLED"
    assert (resource.end_time - clicked).total_seconds() < 2.0
    assert processes_of_job(job_id) == []
