"""Real TensorFlow and PyTorch replicas reading the environment the workbench gives them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT, job_status, log_lines, pool, processes_of_job, vtrain, write_spec

pytestmark = pytest.mark.slow


def _run(tmp_path: Path, pools: list[dict], *extra: str) -> tuple[Path, str]:
    spec = write_spec(tmp_path / "job.yaml", pools)
    job_dir = tmp_path / "job"
    done = vtrain("run", str(spec), "--job-dir", str(job_dir), *extra)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert processes_of_job(job_status(job_dir)["job_id"]) == []
    return job_dir, done.stdout


def test_tf_cluster_resolver_reads_every_replicas_tf_config(tmp_path: Path) -> None:
    pools = [pool(count, trainer="resolver_report.py") for count in (1, 2, 1, 1)]
    job_dir, _ = _run(tmp_path, pools)
    reports = {task: json.loads(log_lines(job_dir, task)[-1][2])
               for task in ("workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool2-0", "workerpool3-0")}
    expected = {"workerpool0-0": ("chief", 0), "workerpool1-0": ("worker", 0), "workerpool1-1": ("worker", 1),
                "workerpool2-0": ("ps", 0), "workerpool3-0": ("evaluator", 0)}
    cluster = reports["workerpool0-0"]["cluster"]
    assert sorted(cluster) == ["chief", "ps", "worker"] and len(cluster["worker"]) == 2
    for task, (task_type, task_id) in expected.items():
        report = reports[task]
        assert (report["task_type"], report["task_id"]) == (task_type, task_id)
        assert report["cluster"] == cluster  # the same cluster everywhere; evaluators are not in it
        assert report["tf_config"]["cluster"] == cluster


def test_multi_worker_mirrored_strategy_converges_and_the_chief_saves(tmp_path: Path) -> None:
    pools = [pool(count, trainer="mwms_ctl.py", args=["--epochs", "3"]) for count in (1, 2)]
    job_dir, out = _run(tmp_path, pools)
    model_dir = job_dir / "output" / "model"
    done = json.loads((model_dir / "done.json").read_text())
    assert done["final_loss"] < done["first_loss"] / 2
    assert done["num_replicas_in_sync"] == 3
    assert (model_dir / "model.keras").is_file()
    assert "workertemp_0/model.keras" in out and "workertemp_1/model.keras" in out  # workers saved elsewhere
    assert sorted(p.name for p in model_dir.iterdir()) == ["done.json", "model.keras"]  # ...and cleaned up


def test_parameter_server_strategy_and_servers_are_stopped(tmp_path: Path) -> None:
    pools = [pool(1, trainer="ps_strategy.py", args=["--epochs", "2"]), pool(2, trainer="ps_strategy.py"),
             pool(1, trainer="ps_strategy.py")]
    job_dir, out = _run(tmp_path, pools)
    assert "final_loss=" in out
    codes = {r["task_name"]: r["exit_code"] for r in job_status(job_dir)["replicas"]}
    assert codes == {"workerpool0-0": 0, "workerpool1-0": None, "workerpool1-1": None, "workerpool2-0": None}


def test_pytorch_gloo_all_reduce_across_three_replicas(tmp_path: Path) -> None:
    job_dir, _ = _run(tmp_path, [pool(trainer="torch_allreduce.py"), pool(2, trainer="torch_allreduce.py")])
    lines = {task: log_lines(job_dir, task)[-1][2] for task in ("workerpool0-0", "workerpool1-0", "workerpool1-1")}
    assert lines == {f"workerpool{p}-{i}": f"rank={r} world_size=3 sum=6 ok"
                     for p, i, r in ((0, 0, 0), (1, 0, 1), (1, 1, 2))}


def test_the_example_job_of_the_readme_trains(tmp_path: Path) -> None:
    done = vtrain("run", str(ROOT / "jupyter_ext/examples/multiworker.yaml"), "--job-dir", str(tmp_path / "job"))
    assert done.returncode == 0, done.stdout[-3000:]
    metrics = json.loads((tmp_path / "job/output/model/metrics.json").read_text())
    assert metrics["accuracy"] > 0.6
    assert done.stdout.splitlines()[-1].endswith("SUCCEEDED [workerpool0-0=0, workerpool1-0=0]")
