"""validate: each rule passes a good job and names the exact field of a bad one; `vtrain validate`."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import legacy_job, pool, vtrain_in_process, write_file, write_spec
from jupyter_ext.errors import SpecError, ValidationError
from jupyter_ext.spec import JobSpec
from jupyter_ext.validate import check, problems

SPECS = Path(__file__).parent / "data" / "specs"
TF_CPU = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"
PACKAGE = {"executorImageUri": TF_CPU, "packageUris": ["gs://b/trainer-0.1.tar.gz"], "pythonModule": "trainer.task"}


def job(*pools, name="job", **spec):
    j = JobSpec.from_dict({"workerPoolSpecs": list(pools), **spec})
    j.display_name = name  # as the widgets and `vtrain run --name` set it
    return j


def package_pool(**changes):
    pkg = {k: v for k, v in {**PACKAGE, **changes}.items() if v is not None}
    return pool(containerSpec=None, pythonPackageSpec=pkg)


GOOD = {
    "primary only": [pool()],
    "primary and workers": [pool(), pool(replicas=3)],
    "gap in the middle": [pool(), {}, pool(replicas=2)],
    "two gaps then evaluator": [pool(), {}, {}, pool()],
    "four pools": [pool(), pool(replicas=2), pool(replicas=2), pool(replicas=3)],
    "T4 x 4 on n1-standard-8": [pool(),
                                pool(machine="n1-standard-8", accelerator="NVIDIA_TESLA_T4", accelerator_count=4)],
    "V100 x 2 on n1-standard-16": [
        pool(machine="n1-standard-16", accelerator="NVIDIA_TESLA_V100", accelerator_count=2)],
    "V100 as enum number": [pool(machine="n1-standard-16", accelerator=3, accelerator_count=2)],
    "a2-highgpu-2g with A100 x 2": [
        pool(machine="a2-highgpu-2g", accelerator="NVIDIA_TESLA_A100", accelerator_count=2)],
    "cloud-tpu TPU_V3 x 8": [pool(machine="cloud-tpu", accelerator="TPU_V3", accelerator_count=8)],
    "ct5lp-hightpu-4t 2x2": [pool(machine="ct5lp-hightpu-4t", topology="2x2")],
    "python package": [package_pool()],
    "env names": [pool(image="i", env={"_A1": "x", "lower_case": ""})],
    "disk 100 GB pd-standard": [pool(diskSpec={"bootDiskType": "pd-standard", "bootDiskSizeGb": 100})],
    "disk 64000 GB hyperdisk": [pool(diskSpec={"bootDiskType": "hyperdisk-balanced", "bootDiskSizeGb": 64000})],
}


@pytest.mark.parametrize("pools", GOOD.values(), ids=GOOD.keys())
def test_good_jobs_have_no_problems(pools):
    assert problems(job(*pools)) == []


# (id, pools, exact field path, a fragment of the reason)
BAD = [
    ("no pools", [], "workerPoolSpecs[0]", "primary pool is required"),
    ("empty primary", [{}], "workerPoolSpecs[0]", "primary pool is required"),
    ("empty primary with workers", [{}, pool()], "workerPoolSpecs[0]", "primary pool is required"),
    ("primary with 2 replicas", [pool(replicas=2)], "workerPoolSpecs[0].replicaCount", "exactly 1 replica, not 2"),
    ("five pools", [pool()] * 5, "workerPoolSpecs", "5 pools, at most 4"),
    ("0 replicas in a pool", [pool(), pool(replicas=0)], "workerPoolSpecs[1].replicaCount", "at least 1"),
    ("count without type", [pool(accelerator_count=2)], "workerPoolSpecs[0].machineSpec.acceleratorCount",
     "needs an acceleratorType"),
    ("A100 on n1-standard-8", [pool(machine="n1-standard-8", accelerator="NVIDIA_TESLA_A100", accelerator_count=1)],
     "workerPoolSpecs[0].machineSpec.acceleratorType",
     "NVIDIA_TESLA_A100 is not offered on n1-standard-8 (valid: NVIDIA_TESLA_P4 x 1, 2, 4; NVIDIA_TESLA_P100 x 1, 2, 4; "
     "NVIDIA_TESLA_T4 x 1, 2, 4; NVIDIA_TESLA_V100 x 1, 2, 4, 8)"),
    ("V100 x 1 on n1-standard-16",
     [pool(machine="n1-standard-16", accelerator="NVIDIA_TESLA_V100", accelerator_count=1)],
     "workerPoolSpecs[0].machineSpec.acceleratorCount", "(valid: 2, 4, 8)"),
    ("a2-highgpu-2g without accelerator", [pool(machine="a2-highgpu-2g")],
     "workerPoolSpecs[0].machineSpec.acceleratorType", "NVIDIA_TESLA_A100 x 2"),
    ("a2-highgpu-2g with A100 x 1",
     [pool(machine="a2-highgpu-2g", accelerator="NVIDIA_TESLA_A100", accelerator_count=1)],
     "workerPoolSpecs[0].machineSpec.acceleratorCount", "(valid: 2)"),
    ("T4 on e2-standard-4", [pool(machine="e2-standard-4", accelerator="NVIDIA_TESLA_T4", accelerator_count=1)],
     "workerPoolSpecs[0].machineSpec.acceleratorType", "takes no accelerators"),
    ("unknown machine", [pool(), pool(machine="n1-standrd-4")], "workerPoolSpecs[1].machineSpec.machineType",
     "'n1-standrd-4' is not a Vertex AI training machine type (did you mean: n1-standard-4"),
    ("no machine type", [pool(machine="")], "workerPoolSpecs[0].machineSpec.machineType", "required"),
    ("cloud-tpu TPU_V3 x 16", [pool(machine="cloud-tpu", accelerator="TPU_V3", accelerator_count=16)],
     "workerPoolSpecs[0].machineSpec.acceleratorCount", "16 is not offered for TPU_V3 on cloud-tpu"),
    ("ct5lp 3x3", [pool(machine="ct5lp-hightpu-4t", topology="3x3")], "workerPoolSpecs[0].machineSpec.tpuTopology",
     "3x3 is not offered on ct5lp-hightpu-4t (valid: 2x2, 2x4"),
    ("ct5lp without topology", [pool(machine="ct5lp-hightpu-4t")], "workerPoolSpecs[0].machineSpec.tpuTopology",
     "required for ct5lp-hightpu-4t"),
    ("TPU job with a second pool", [pool(machine="cloud-tpu", accelerator="TPU_V3", accelerator_count=8), pool()],
     "workerPoolSpecs[0].machineSpec", "a TPU job runs exactly one pool"),
    ("neither container nor package", [pool(containerSpec=None)], "workerPoolSpecs[0]",
     "give exactly one of containerSpec or pythonPackageSpec"),
    ("container without image", [pool(), pool(containerSpec={"args": ["x"]})],
     "workerPoolSpecs[1].containerSpec.imageUri", "required"),
    ("package without executor image", [package_pool(executorImageUri=None)],
     "workerPoolSpecs[0].pythonPackageSpec.executorImageUri", "required"),
    ("package without packages", [package_pool(packageUris=None)],
     "workerPoolSpecs[0].pythonPackageSpec.packageUris", "at least one"),
    ("package without module", [package_pool(pythonModule=None)],
     "workerPoolSpecs[0].pythonPackageSpec.pythonModule", "required"),
    ("bad env name", [pool(image="i", env={"OK": "1", "MY-VAR": "1"})],
     "workerPoolSpecs[0].containerSpec.env[1].name", "'MY-VAR' is not a valid variable name"),
    ("env name starting with a digit", [package_pool(env=[{"name": "1X", "value": "1"}])],
     "workerPoolSpecs[0].pythonPackageSpec.env[0].name", "'1X'"),
    ("bad disk type", [pool(diskSpec={"bootDiskType": "pd-fast"})], "workerPoolSpecs[0].diskSpec.bootDiskType",
     "'pd-fast' is not offered"),
    ("disk too small", [pool(diskSpec={"bootDiskSizeGb": 99})], "workerPoolSpecs[0].diskSpec.bootDiskSizeGb",
     "99 is out of range (100 to 64000)"),
    ("disk too big", [pool(diskSpec={"bootDiskSizeGb": 64001})], "workerPoolSpecs[0].diskSpec.bootDiskSizeGb",
     "64001 is out of range"),
]


@pytest.mark.parametrize("pools,path,fragment", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_jobs_name_the_field(pools, path, fragment):
    found = problems(job(*pools))
    assert len(found) == 1, found
    field, reason = found[0].split(": ", 1)
    assert field == path
    assert fragment in reason


def test_t4_x3_exact_message():
    t4_x3 = pool(machine="n1-standard-8", accelerator="NVIDIA_TESLA_T4", accelerator_count=3)
    assert problems(job(pool(), t4_x3)) == [
        "workerPoolSpecs[1].machineSpec.acceleratorCount: 3 is not offered for NVIDIA_TESLA_T4 on n1-standard-8 "
        "(valid: 1, 2, 4)"]


def test_every_problem_is_reported():
    t4_x3 = pool(machine="n1-standard-8", accelerator="NVIDIA_TESLA_T4", accelerator_count=3)
    found = problems(job(pool(replicas=2), t4_x3, pool(replicas=0)))
    assert [p.split(": ", 1)[0] for p in found] == [
        "workerPoolSpecs[0].replicaCount", "workerPoolSpecs[1].machineSpec.acceleratorCount",
        "workerPoolSpecs[2].replicaCount"]


def test_both_container_and_package_is_rejected():
    with pytest.raises(SpecError) as err:
        job(pool(pythonPackageSpec=PACKAGE))
    assert str(err.value).startswith("workerPoolSpecs[0]: ")


@pytest.mark.parametrize("name,ok", [("a", True), ("x" * 128, True), ("", False), ("  ", False), ("x" * 129, False)])
def test_display_name(name, ok):
    found = problems(job(pool(), name=name))
    if ok:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith("displayName: ")
    if len(name) == 129:
        assert found == ["displayName: 129 characters is too long (at most 128)"]


@pytest.mark.parametrize("job_id,ok", [
    ("census_2024_run", True), ("A", True), ("Job_1", True),
    ("1census", False), ("census-run", False), ("_census", False), ("census run", False),
])
def test_legacy_job_id(job_id, ok):
    found = problems(legacy_job(job_id))
    if ok:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(f"jobId: {job_id!r} is not a valid AI Platform job ID")


def test_vertex_display_names_may_have_dashes():
    assert problems(job(pool(), name="my-job 1")) == []


@pytest.mark.parametrize("labels,bad", [
    ({"team": "vision", "env-1": "prod_2", "empty": ""}, []),
    ({"Team": "vision"}, ["Team"]),
    ({"team": "Vision"}, ["team"]),
    ({"1team": "x"}, ["1team"]),
    ({"team": "x" * 65}, ["team"]),
    ({"k" * 65: "x"}, ["k" * 65]),
])
def test_labels(labels, bad):
    j = JobSpec.from_dict({"displayName": "j", "labels": labels, "jobSpec": {"workerPoolSpecs": [pool()]}})
    assert sorted(p.split(": ", 1)[0] for p in problems(j)) == sorted(f"labels.{k}" for k in bad)


def test_check_raises_with_all_problems_or_returns_the_job():
    good = job(pool())
    assert check(good) is good
    with pytest.raises(ValidationError) as err:
        check(job(pool(replicas=2), name=""))
    assert len(err.value.problems) == 2
    assert str(err.value).splitlines() == err.value.problems


# ---- vtrain validate -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["rest_custom_job.json", "gcloud_config.yaml", "sdk_pools.yaml", "sdk_job.json",
                                  "legacy_config.yaml"])
def test_vtrain_validate_ok(capsys, name):
    assert vtrain_in_process(capsys, "validate", str(SPECS / name)) == (0, "ok\n", "")


def test_vtrain_validate_reports_each_problem(capsys, tmp_path):
    path = write_spec(tmp_path / "bad.json", [
        pool(replicas=2), pool(machine="n1-standard-8", accelerator="NVIDIA_TESLA_T4", accelerator_count=3),
        pool(machine="e2-standard-4", accelerator="NVIDIA_TESLA_T4", accelerator_count=1)])
    code, out, err = vtrain_in_process(capsys, "validate", str(path))
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert lines == [
        "vtrain: error: workerPoolSpecs[0].replicaCount: the primary pool runs exactly 1 replica, not 2",
        "vtrain: error: workerPoolSpecs[1].machineSpec.acceleratorCount: 3 is not offered for NVIDIA_TESLA_T4 "
        "on n1-standard-8 (valid: 1, 2, 4)",
        "vtrain: error: workerPoolSpecs[2].machineSpec.acceleratorType: NVIDIA_TESLA_T4 is not offered on "
        "e2-standard-4 (it takes no accelerators)",
    ]
    assert "Traceback" not in err


@pytest.mark.parametrize("content,field", [
    ({"workerPoolSpecs": [pool(pythonPackageSpec=PACKAGE)]}, "workerPoolSpecs[0]"),
    ({"workerPoolSpecs": [pool(replicas="two")]}, "workerPoolSpecs[0].replicaCount"),
    ({"workerPoolSpecs": [pool(machine="n1-standard-8", accelerator="NVIDIA_T4", accelerator_count=1)]},
     "workerPoolSpecs[0].machineSpec.acceleratorType"),
    # an acceleratorType number that is no AcceleratorType member
    ({"workerPoolSpecs": [pool(machine="n1-standard-8", accelerator=99, accelerator_count=1)]},
     "workerPoolSpecs[0].machineSpec.acceleratorType"),
], ids=["both task specs", "bad replicaCount", "bad enum name", "bad enum number"])
def test_vtrain_validate_unreadable_job_is_one_line(capsys, tmp_path, content, field):
    code, out, err = vtrain_in_process(capsys, "validate", str(write_file(tmp_path / "job.json", content)))
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"vtrain: error: {field}: ")
    assert "Traceback" not in err


def test_vtrain_validate_missing_file(capsys, tmp_path):
    code, out, err = vtrain_in_process(capsys, "validate", str(tmp_path / "nope.yaml"))
    assert (code, out) == (2, "")
    assert err == f"vtrain: error: no such job file: {tmp_path / 'nope.yaml'}\n"


def test_legacy_config_without_job_id_validates_whatever_its_file_name(capsys, tmp_path):
    # gcloud takes the job ID on the command line; config.yaml has none. A file called
    # census-config.yaml must not fail for a job ID the user never wrote.
    path = tmp_path / "census-config.yaml"
    path.write_text("trainingInput:\n  masterType: standard\n  masterConfig:\n    imageUri: gcr.io/p/census:1\n")
    assert vtrain_in_process(capsys, "validate", str(path)) == (0, "ok\n", "")
