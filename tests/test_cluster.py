"""cluster.replicas: the address and environment Vertex AI gives every replica; `vtrain inspect`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import legacy_job, pool, vtrain_in_process, write_spec
from jupyter_ext import catalog
from jupyter_ext.cluster import replicas
from jupyter_ext.errors import SpecError
from jupyter_ext.spec import JobSpec

SPECS = Path(__file__).parent / "data" / "specs"
CLOUD_ADDRESS = re.compile(r"cmle-training-workerpool(\d)-[0-9a-f]{10}-(\d+):2222")


def vertex_job(*counts, name="dist", base="gs://bucket/out"):
    """A Vertex job with `counts[p]` replicas in pool p (0 = a `{}` gap)."""
    body = {"displayName": name, "jobSpec": {"workerPoolSpecs": [pool(c) if c else {} for c in counts]}}
    if base:
        body["jobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": base}
    return JobSpec.from_dict(body)


def env_json(replica, key):
    return json.loads(replica.env[key])


# ---- example 1: 1 primary, 2 workers, 2 parameter servers, 3 evaluators --------------------------------

@pytest.fixture
def example1():
    job = vertex_job(1, 2, 2, 3)
    return job, replicas(job)


def test_example1_replicas_in_pool_order(example1):
    _, reps = example1
    assert [r.task_name for r in reps] == ["workerpool0-0", "workerpool1-0", "workerpool1-1", "workerpool2-0",
                                           "workerpool2-1", "workerpool3-0", "workerpool3-1", "workerpool3-2"]
    assert [r.role for r in reps] == ["primary", "worker", "worker", "parameter_server", "parameter_server",
                                      "evaluator", "evaluator", "evaluator"]


def test_example1_cluster_spec(example1):
    job, reps = example1
    clusters = [env_json(r, "CLUSTER_SPEC")["cluster"] for r in reps]
    assert all(c == clusters[0] for c in clusters)  # the same on every replica
    assert {k: len(v) for k, v in clusters[0].items()} == {"workerpool0": 1, "workerpool1": 2, "workerpool2": 2,
                                                           "workerpool3": 3}
    for r in reps:
        spec = env_json(r, "CLUSTER_SPEC")
        assert spec["task"] == {"type": f"workerpool{r.pool}", "index": r.index}
        assert spec["environment"] == "cloud"
        assert spec["job"] == job.to_dict("rest")["jobSpec"]
        assert spec["cluster"][f"workerpool{r.pool}"][r.index] == r.address


def test_example1_tf_config(example1):
    job, reps = example1
    clusters = [env_json(r, "TF_CONFIG")["cluster"] for r in reps]
    assert all(c == clusters[0] for c in clusters)
    cluster_spec = env_json(reps[0], "CLUSTER_SPEC")["cluster"]
    assert clusters[0] == {"chief": cluster_spec["workerpool0"], "worker": cluster_spec["workerpool1"],
                           "ps": cluster_spec["workerpool2"]}  # never an evaluator key
    tasks = [env_json(r, "TF_CONFIG")["task"] for r in reps]
    assert tasks == [{"type": "chief", "index": 0}, {"type": "worker", "index": 0}, {"type": "worker", "index": 1},
                     {"type": "ps", "index": 0}, {"type": "ps", "index": 1}, {"type": "evaluator", "index": 0},
                     {"type": "evaluator", "index": 1}, {"type": "evaluator", "index": 2}]
    assert [r.tf_task for r in reps] == [t["type"] for t in tasks]
    for r in reps:
        tf = env_json(r, "TF_CONFIG")
        assert tf["environment"] == "cloud"
        assert tf["job"] == job.to_dict("rest")["jobSpec"]
        assert "trial" not in tf["task"] and "trial" not in env_json(r, "CLUSTER_SPEC")["task"]
        assert "CLOUD_ML_TRIAL_ID" not in r.env


# ---- example 2: tuning trial "1" with chief, 2 workers, 1 ps --------------------------------------------

@pytest.mark.parametrize("trial", ["1", 1])
def test_example2_trial_on_every_replica(trial):
    reps = replicas(vertex_job(1, 2, 1), trial=trial)
    assert len(reps) == 4
    for r in reps:
        assert env_json(r, "TF_CONFIG")["task"]["trial"] == "1"
        assert env_json(r, "CLUSTER_SPEC")["task"]["trial"] == "1"
    worker0 = env_json(reps[1], "TF_CONFIG")
    assert worker0["task"] == {"type": "worker", "index": 0, "trial": "1"}
    assert {k: len(v) for k, v in worker0["cluster"].items()} == {"chief": 1, "worker": 2, "ps": 1}


# ---- single replica ---------------------------------------------------------------------------------------

def test_single_replica_has_cluster_spec_but_no_tf_config():
    (only,) = replicas(vertex_job(1))
    assert "TF_CONFIG" not in only.env and only.tf_task is None
    spec = env_json(only, "CLUSTER_SPEC")
    assert spec["cluster"] == {"workerpool0": [only.address]}
    assert spec["task"] == {"type": "workerpool0", "index": 0}


def test_gap_pool_is_not_in_the_cluster():
    reps = replicas(vertex_job(1, 0, 2))
    assert list(env_json(reps[0], "CLUSTER_SPEC")["cluster"]) == ["workerpool0", "workerpool2"]
    assert list(env_json(reps[0], "TF_CONFIG")["cluster"]) == ["chief", "ps"]
    assert [r.task_name for r in reps] == ["workerpool0-0", "workerpool2-0", "workerpool2-1"]


# ---- AIP_* output folders ----------------------------------------------------------------------------------

AIP = ("AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR")


@pytest.mark.parametrize("base", ["gs://bucket/out", "gs://bucket/out/"])
@pytest.mark.parametrize("trial,root", [(None, "gs://bucket/out/"), ("3", "gs://bucket/out/3/")])
def test_output_dirs(base, trial, root):
    for r in replicas(vertex_job(1, 2, base=base), trial=trial):
        assert [r.env[k] for k in AIP] == [root + "model/", root + "checkpoints/", root + "logs/"]


def test_no_output_dirs_without_base():
    for r in replicas(vertex_job(1, 1, base=None)):
        assert not set(AIP) & set(r.env)


@pytest.mark.parametrize("base", ["gs://bucket/out", None])
def test_output_dir_overrides_base(base):
    for r in replicas(vertex_job(1, 1, base=base), output_dir="/tmp/jobs/7/output", trial="2"):
        assert r.env["AIP_MODEL_DIR"] == "/tmp/jobs/7/output/2/model/"
        assert r.env["AIP_TENSORBOARD_LOG_DIR"] == "/tmp/jobs/7/output/2/logs/"


# ---- address styles ----------------------------------------------------------------------------------------

def test_cloud_addresses_follow_vertex_pattern():
    reps = replicas(vertex_job(1, 2, 1, 1))
    for r in reps:
        m = CLOUD_ADDRESS.fullmatch(r.address)
        assert m, r.address
        assert (int(m.group(1)), int(m.group(2))) == (r.pool, r.index)
        assert r.port == 2222
    assert len({r.address for r in reps}) == len(reps)
    assert [r.address for r in replicas(vertex_job(1, 2, 1, 1))] == [r.address for r in reps]  # stable


def test_process_addresses_use_given_ports_in_order():
    reps = replicas(vertex_job(1, 2, 1), style="process", ports=[41000, 41007, 41003, 41001])
    assert [r.address for r in reps] == ["127.0.0.1:41000", "127.0.0.1:41007", "127.0.0.1:41003", "127.0.0.1:41001"]
    assert env_json(reps[2], "TF_CONFIG")["cluster"] == {
        "chief": ["127.0.0.1:41000"], "worker": ["127.0.0.1:41007", "127.0.0.1:41003"], "ps": ["127.0.0.1:41001"]}


def test_docker_addresses_are_replica_names():
    reps = replicas(vertex_job(1, 2, 0, 1), style="docker")
    assert [r.address for r in reps] == ["workerpool0-0:2222", "workerpool1-0:2222", "workerpool1-1:2222",
                                         "workerpool3-0:2222"]
    assert env_json(reps[0], "CLUSTER_SPEC")["cluster"]["workerpool1"] == ["workerpool1-0:2222", "workerpool1-1:2222"]


def test_unknown_address_style():
    with pytest.raises(SpecError) as err:
        replicas(vertex_job(1), style="kubernetes")
    assert str(err.value).startswith("--addresses: ") and "kubernetes" in str(err.value)


# ---- PyTorch variables --------------------------------------------------------------------------------------

def test_pytorch_variables():
    reps = replicas(vertex_job(1, 2, 2, 2), style="process", ports=list(range(42000, 42007)))
    assert {(r.env["MASTER_ADDR"], r.env["MASTER_PORT"]) for r in reps} == {("127.0.0.1", "42000")}
    trainers = [r for r in reps if r.pool != 3]
    assert [r.env["RANK"] for r in trainers] == ["0", "1", "2", "3", "4"]
    assert {r.env["WORLD_SIZE"] for r in trainers} == {"5"}
    for evaluator in (r for r in reps if r.pool == 3):
        assert "RANK" not in evaluator.env and "WORLD_SIZE" not in evaluator.env


def test_pytorch_master_is_the_primary_in_cloud_style():
    reps = replicas(vertex_job(1, 1))
    assert reps[1].env["MASTER_ADDR"] == reps[0].host and reps[1].env["MASTER_PORT"] == "2222"


# ---- legacy AI Platform mode ---------------------------------------------------------------------------------

@pytest.mark.parametrize("ti,primary", [
    ({"workerCount": 2, "parameterServerCount": 1}, "master"),
    ({"workerCount": 2, "useChiefInTfConfig": True}, "chief"),
    ({"workerCount": 1, "evaluatorCount": 1}, "chief"),
])
def test_legacy_primary_task_name(ti, primary):
    reps = replicas(legacy_job(**ti), legacy=True)
    tf = env_json(reps[0], "TF_CONFIG")
    assert tf["task"] == {"type": primary, "index": 0}
    other = {"master": "chief", "chief": "master"}[primary]
    assert primary in tf["cluster"] and other not in tf["cluster"]
    assert reps[0].tf_task == primary


def test_a_legacy_job_runs_with_vertex_names_unless_asked():
    reps = replicas(legacy_job(workerCount=2))
    tf = env_json(reps[0], "TF_CONFIG")
    assert tf["task"]["type"] == "chief" and list(tf["cluster"]) == ["chief", "worker"]
    assert list(env_json(reps[0], "CLUSTER_SPEC")["cluster"]) == ["workerpool0", "workerpool1"]


def test_legacy_cluster_spec_uses_ai_platform_names():
    job = legacy_job(workerCount=2, parameterServerCount=1, evaluatorCount=1, jobDir="gs://b/census",
                     useChiefInTfConfig=True)
    reps = replicas(job, legacy=True)
    spec = env_json(reps[1], "CLUSTER_SPEC")
    assert {k: len(v) for k, v in spec["cluster"].items()} == {"master": 1, "worker": 2, "ps": 1, "evaluator": 1}
    assert spec["task"] == {"type": "worker", "index": 0}
    assert [env_json(r, "CLUSTER_SPEC")["task"]["type"] for r in reps] == [
        "master", "worker", "worker", "ps", "evaluator"]
    # `job` is the trainingInput: it loads back into the same job
    ti = spec["job"]
    assert ti["jobDir"] == "gs://b/census" and ti["useChiefInTfConfig"] is True
    assert JobSpec.from_dict({"jobId": "census", "trainingInput": ti}) == job
    assert env_json(reps[1], "TF_CONFIG")["job"] == ti


def test_legacy_sample_file():
    reps = replicas(JobSpec.load(SPECS / "legacy_config.yaml"))
    assert [r.tf_task for r in reps] == ["chief", "worker", "worker", "ps", "evaluator"]
    assert reps[0].env["AIP_MODEL_DIR"] == "gs://bucket/census/model/"  # jobDir is the base output directory


# ---- Reduction Server ------------------------------------------------------------------------------------------

def test_reduction_server_is_not_a_training_task():
    job = JobSpec.from_dict({"displayName": "rs", "jobSpec": {"workerPoolSpecs": [
        pool(1), pool(2), pool(3, image=catalog.reduction_server_image(), machine="n1-highcpu-16")]}})
    reps = replicas(job, style="docker")
    reducers = [r for r in reps if r.pool == 2]
    assert [r.role for r in reducers] == ["reduction_server"] * 3
    spec_cluster = env_json(reps[0], "CLUSTER_SPEC")["cluster"]
    assert spec_cluster["workerpool2"] == ["workerpool2-0:2222", "workerpool2-1:2222", "workerpool2-2:2222"]
    tf_cluster = env_json(reps[0], "TF_CONFIG")["cluster"]
    assert tf_cluster == {"chief": ["workerpool0-0:2222"], "worker": ["workerpool1-0:2222", "workerpool1-1:2222"]}
    for r in reducers:
        assert "RANK" not in r.env and "WORLD_SIZE" not in r.env
    assert [r.env["RANK"] for r in reps if r.pool < 2] == ["0", "1", "2"]
    assert {r.env["WORLD_SIZE"] for r in reps if r.pool < 2} == {"3"}


def test_parameter_servers_are_not_reduction_servers():
    reps = replicas(vertex_job(1, 1, 1))
    assert reps[2].role == "parameter_server" and "ps" in env_json(reps[2], "TF_CONFIG")["cluster"]


# ---- CLOUD_ML_JOB_ID ---------------------------------------------------------------------------------------------

def test_cloud_ml_job_id():
    job = vertex_job(1, 1, name="my-run")
    assert {r.env["CLOUD_ML_JOB_ID"] for r in replicas(job)} == {"my-run"}
    assert {r.env["CLOUD_ML_JOB_ID"] for r in replicas(job, job_id="8374629")} == {"8374629"}


# ---- vtrain inspect ------------------------------------------------------------------------------------------------

def example1_file(tmp_path):
    path = tmp_path / "example1.json"
    path.write_text(vertex_job(1, 2, 2, 3).dump("rest"))
    return str(path)


def test_inspect_json_one_object_per_replica(capsys, tmp_path):
    code, out, err = vtrain_in_process(capsys, "inspect", example1_file(tmp_path), "--json")
    assert (code, err) == (0, "")
    rows = json.loads(out)
    assert len(rows) == 8
    assert {"task_name", "pool", "role", "index", "address", "env"} <= set(rows[0])
    assert [(r["task_name"], r["pool"], r["index"]) for r in rows][:3] == [
        ("workerpool0-0", 0, 0), ("workerpool1-0", 1, 0), ("workerpool1-1", 1, 1)]
    assert rows[5]["role"] == "evaluator"
    assert all(CLOUD_ADDRESS.fullmatch(r["address"]) for r in rows)
    assert json.loads(rows[3]["env"]["TF_CONFIG"])["task"] == {"type": "ps", "index": 0}


def test_inspect_one_replica(capsys, tmp_path):
    code, out, _ = vtrain_in_process(capsys, "inspect", example1_file(tmp_path), "--json", "--replica", "workerpool1-0",
                                     "--trial", "2")
    assert code == 0
    (row,) = json.loads(out)
    assert (row["task_name"], row["role"]) == ("workerpool1-0", "worker")
    assert json.loads(row["env"]["CLUSTER_SPEC"])["task"] == {"type": "workerpool1", "index": 0, "trial": "2"}


def test_inspect_unknown_replica(capsys, tmp_path):
    code, out, err = vtrain_in_process(capsys, "inspect", example1_file(tmp_path), "--replica", "workerpool4-0")
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and err.startswith("vtrain: error: --replica: ")
    assert "workerpool4-0" in err and "workerpool3-2" in err


def test_inspect_docker_addresses(capsys, tmp_path):
    code, out, _ = vtrain_in_process(capsys, "inspect", example1_file(tmp_path), "--json", "--addresses", "docker")
    assert code == 0
    rows = json.loads(out)
    assert [r["address"] for r in rows] == [f"{r['task_name']}:2222" for r in rows]


def test_inspect_table(capsys):
    code, out, _ = vtrain_in_process(capsys, "inspect", str(SPECS / "rest_custom_job.json"), "--addresses", "process")
    assert code == 0
    assert "workerpool1-1" in out and "worker:1" in out and "127.0.0.1:" in out
    assert "TF_CONFIG cluster (every replica)" in out


def test_inspect_refuses_an_invalid_job(capsys, tmp_path):
    path = write_spec(tmp_path / "bad.json", [pool(2)])
    code, out, err = vtrain_in_process(capsys, "inspect", str(path))
    assert (code, out) == (2, "")
    assert err.startswith("vtrain: error: workerPoolSpecs[0].replicaCount: ") and "Traceback" not in err
