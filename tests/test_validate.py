"""validate: each rule passes a good job and names the exact field of a bad one; `vtrain validate`."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import legacy_job, pool, vtrain_in_process, write_file, write_spec
from jupyter_ext.errors import SpecError, ValidationError
from jupyter_ext.spec import JobSpec
from jupyter_ext.validate import check, notices, problems

SPECS = Path(__file__).parent / "data" / "specs"
TF_CPU = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"
A100 = {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 1}
SA = "trainer@p.iam.gserviceaccount.com"
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
    "cloud-tpu TPU_V2 x 96 (a Pod)": [pool(machine="cloud-tpu", accelerator="TPU_V2", accelerator_count=96)],
    "cloud-tpu TPU_V3 x 64 (a Pod slice)": [pool(machine="cloud-tpu", accelerator="TPU_V3", accelerator_count=64)],
    "MIG partition of one A100": [pool(machineSpec={**A100, "gpuPartitionSize": "1g.5gb"})],
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
     "workerPoolSpecs[0].machineSpec.acceleratorCount", "16 is not offered for TPU_V3 on cloud-tpu "
                                                        "(valid: 8, 32, 64, 128, 256, 512, 1024, 2048)"),
    ("cloud-tpu TPU_V3 x 33", [pool(machine="cloud-tpu", accelerator="TPU_V3", accelerator_count=33)],
     "workerPoolSpecs[0].machineSpec.acceleratorCount", "33 is not offered for TPU_V3 on cloud-tpu"),
    ("cloud-tpu TPU_V2 x 48", [pool(machine="cloud-tpu", accelerator="TPU_V2", accelerator_count=48)],
     "workerPoolSpecs[0].machineSpec.acceleratorCount", "48 is not offered for TPU_V2 on cloud-tpu "
                                                        "(valid: 8, or a multiple of 32)"),
    ("TPU_V4_POD has no training machine", [pool(machine="cloud-tpu", accelerator="TPU_V4_POD", accelerator_count=8)],
     "workerPoolSpecs[0].machineSpec.acceleratorType", "TPU_V4_POD: no Vertex AI training machine type takes it"),
    ("MIG on a T4", [pool(machineSpec={"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4",
                                       "acceleratorCount": 1, "gpuPartitionSize": "1g.5gb"})],
     "workerPoolSpecs[0].machineSpec.gpuPartitionSize", "NVIDIA_TESLA_T4 has no MIG partitions (GPUs with MIG: "
                                                        "NVIDIA A100 40GB"),
    ("MIG of two GPUs", [pool(machineSpec={"machineType": "a2-highgpu-2g", "acceleratorType": "NVIDIA_TESLA_A100",
                                           "acceleratorCount": 2, "gpuPartitionSize": "1g.5gb"})],
     "workerPoolSpecs[0].machineSpec.acceleratorCount", "must be 1 with gpuPartitionSize"),
    ("MIG profile misspelt", [pool(machineSpec={**A100, "gpuPartitionSize": "1g-5gb"})],
     "workerPoolSpecs[0].machineSpec.gpuPartitionSize", "'1g-5gb' is not a MIG profile such as 1g.10gb"),
    ("specific reservation without a name", [pool(machineSpec={
        "machineType": "n1-standard-4", "reservationAffinity": {"reservationAffinityType": "SPECIFIC_RESERVATION"}})],
     "workerPoolSpecs[0].machineSpec.reservationAffinity", "SPECIFIC_RESERVATION needs key and values"),
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
def test_vtrain_validate_unreadable_job_is_one_line(capsys, recwarn, tmp_path, content, field):
    code, out, err = vtrain_in_process(capsys, "validate", str(write_file(tmp_path / "job.json", content)))
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"vtrain: error: {field}: ")
    assert "Traceback" not in err
    assert [str(w.message) for w in recwarn] == []  # a warning would be printed above the line


TUNING_BODY = {"displayName": "hp", "maxTrialCount": 2, "parallelTrialCount": 1,
               "studySpec": {"metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
                             "parameters": [{"parameterId": "units", "discreteValueSpec": {"values": [32, 64]}}]},
               "trialJobSpec": {"workerPoolSpecs": [pool()]}}


@pytest.mark.parametrize("change, error", [
    ({}, None),
    ({"maxTrialCount": 0}, "maxTrialCount: required, a positive number of trials"),
    ({"trialJobSpec": {"workerPoolSpecs": [pool(machine="n1-standard-3")]}},
     "trialJobSpec.workerPoolSpecs[0].machineSpec.machineType: 'n1-standard-3' is not a Vertex AI training machine"),
    ({"studySpec": {"metrics": [{"metricId": "accuracy", "goal": 99}]}},
     "studySpec.metrics[0].goal: invalid value 99 (valid: MAXIMIZE, MINIMIZE)"),
], ids=["valid", "no trials", "trial machine", "goal number"])
def test_vtrain_validate_takes_the_tuning_job_body_vtrain_tune_takes(capsys, tmp_path, change, error):
    code, out, err = vtrain_in_process(capsys, "validate", str(write_file(tmp_path / "hp.json",
                                                                          {**TUNING_BODY, **change})))
    if error is None:
        assert (code, out) == (0, "ok\n")
    else:
        assert (code, out) == (2, "") and err.startswith(f"vtrain: error: {error}")


def study_with(*parameters):
    return {**TUNING_BODY, "studySpec": {**TUNING_BODY["studySpec"], "parameters": list(parameters)}}


@pytest.mark.parametrize("parameter, errors", [
    ({"parameterId": "lr", "doubleValueSpec": {"minValue": "-Infinity", "maxValue": "Infinity"}},
     ["studySpec.parameters[0].doubleValueSpec.minValue: must be a finite number, not -inf",
      "studySpec.parameters[0].doubleValueSpec.maxValue: must be a finite number, not inf"]),
    ({"parameterId": "lr", "doubleValueSpec": {"minValue": "NaN", "maxValue": 1}},
     ["studySpec.parameters[0].doubleValueSpec.minValue: must be a finite number, not nan"]),
    ({"parameterId": "lr", "doubleValueSpec": {"minValue": 0, "maxValue": 1, "defaultValue": "Infinity"}},
     ["studySpec.parameters[0].doubleValueSpec.defaultValue: must be a finite number, not inf"]),
    ({"parameterId": "units", "discreteValueSpec": {"values": [32, "NaN"]}},
     ["studySpec.parameters[0].discreteValueSpec.values[1]: must be a finite number, not nan"]),
], ids=["infinite bounds", "NaN bound", "infinite default", "NaN discrete value"])
def test_a_study_parameter_takes_only_finite_numbers(capsys, tmp_path, parameter, errors):
    code, out, err = vtrain_in_process(capsys, "validate", str(write_file(tmp_path / "hp.json", study_with(parameter))))
    assert (code, out) == (2, "") and err.splitlines() == [f"vtrain: error: {line}" for line in errors]


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


# ---- scheduling and access (issue 16) ------------------------------------------------------------------

REDUCERS = pool(replicas=4, machine="n1-highcpu-16", image="us-docker.pkg.dev/vertex-ai-restricted/training/"
                                                             "reductionserver:latest")
FLEX = {"strategy": "FLEX_START", "maxWaitDuration": "7200s", "timeout": "86400s"}
A4X = {"machineType": "a4x-highgpu-4g", "acceleratorType": "NVIDIA_GB200", "acceleratorCount": 4}
TF_GPU = "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest"  # a prebuilt image, linux/amd64
ARM64_IMAGE = "us-docker.pkg.dev/p/trainers/a4x:1-arm64"  # the user's own, as `vtrain build --machine-type` tags it

GOOD_SCHEDULING = {
    "FLEX_START, A100 in every pool": ([pool(machineSpec=A100), pool(replicas=3, machineSpec=A100)], {"scheduling": FLEX}),
    "FLEX_START, waits for ever": ([pool(machineSpec=A100)], {"scheduling": {"strategy": "FLEX_START",
                                                                            "maxWaitDuration": "0s"}}),
    "SPOT, T4 workers": ([pool(), pool(replicas=2, machine="n1-standard-8", accelerator="NVIDIA_TESLA_T4",
                                       accelerator_count=1)], {"scheduling": {"strategy": "SPOT"}}),
    "SPOT, one TPU host": ([pool(machine="ct5lp-hightpu-4t", topology="2x2")], {"scheduling": {"strategy": "SPOT"}}),
    "SPOT, one TPU v3 device": ([pool(machine="cloud-tpu", accelerator="TPU_V3", accelerator_count=8)],
                                {"scheduling": {"strategy": "SPOT"}}),
    "A4X running its own image (built for linux/arm64)": ([pool(machineSpec=A4X, image=ARM64_IMAGE)], {}),
    "every access field": ([pool()], {"serviceAccount": SA, "network": "projects/123/global/networks/vpc",
                                      "reservedIpRanges": ["r-a"], "enableWebAccess": True,
                                      "enableDashboardAccess": True, "persistentResourceId": "pool-1",
                                      "tensorboard": "projects/p/locations/us-central1/tensorboards/1"}),
}


@pytest.mark.parametrize("pools,spec", GOOD_SCHEDULING.values(), ids=GOOD_SCHEDULING.keys())
def test_valid_spot_and_flex_start_jobs_pass(pools, spec):
    assert problems(job(*pools, **spec)) == []


BAD_SCHEDULING = [
    ("FLEX_START on T4", [pool(machine="n1-standard-8", accelerator="NVIDIA_TESLA_T4", accelerator_count=1)],
     {"scheduling": {"strategy": "FLEX_START"}}, "workerPoolSpecs[0].machineSpec.acceleratorType",
     "FLEX_START (scheduling.strategy) takes NVIDIA A100 40GB, NVIDIA A100 80GB, NVIDIA L4, NVIDIA H100 80GB, "
     "NVIDIA H100 Mega 80GB, NVIDIA H200 141GB, NVIDIA B200; this pool has NVIDIA_TESLA_T4"),
    ("FLEX_START on CPUs", [pool()], {"scheduling": {"strategy": "FLEX_START"}},
     "workerPoolSpecs[0].machineSpec.acceleratorType", "this pool has no accelerator"),
    ("FLEX_START, workers on other machines", [pool(machineSpec=A100), pool(
        replicas=2, machine="a2-highgpu-2g", accelerator="NVIDIA_TESLA_A100", accelerator_count=2)],
     {"scheduling": FLEX}, "workerPoolSpecs[1].machineSpec",
     "runs every pool on the machine configuration of workerPoolSpecs[0] (a2-highgpu-1g with 1 x NVIDIA_TESLA_A100), "
     "not a2-highgpu-2g with 2 x NVIDIA_TESLA_A100"),
    ("FLEX_START with a Reduction Server", [pool(machineSpec=A100), pool(machineSpec=A100), REDUCERS],
     {"scheduling": FLEX}, "workerPoolSpecs[2]", "FLEX_START (scheduling.strategy) takes no Reduction Server pool"),
    ("FLEX_START with a Reduction Server on the workers' machine", [pool(machineSpec=A100), pool(machineSpec=A100),
                                                                   {**REDUCERS, "machineSpec": A100}],
     {"scheduling": FLEX}, "workerPoolSpecs[2]", "FLEX_START (scheduling.strategy) takes no Reduction Server pool"),
    ("FLEX_START for 8 days", [pool(machineSpec=A100)], {"scheduling": {**FLEX, "timeout": "691200s"}},
     "scheduling.timeout", "at most 7 days with FLEX_START (this job: 691200s)"),
    ("a wait without FLEX_START", [pool()], {"scheduling": {"strategy": "SPOT", "maxWaitDuration": "3600s"}},
     "scheduling.maxWaitDuration", "only used with strategy FLEX_START (this job: SPOT)"),
    ("SPOT on a TPU v3 Pod", [pool(machine="cloud-tpu", accelerator="TPU_V3", accelerator_count=32)],
     {"scheduling": {"strategy": "SPOT"}}, "scheduling.strategy",
     "SPOT is not offered for TPU Pods (workerPoolSpecs[0] is a cloud-tpu with 32 x TPU_V3 Pod)"),
    ("SPOT on a multi-host v5e slice", [pool(machine="ct5lp-hightpu-4t", topology="4x4")],
     {"scheduling": {"strategy": "SPOT"}}, "scheduling.strategy", "SPOT is not offered for TPU Pods"),
    ("TensorBoard without a service account", [pool()],
     {"tensorboard": "projects/p/locations/us-central1/tensorboards/1"}, "serviceAccount",
     "required with tensorboard"),
    ("TensorBoard by display name", [pool()], {"tensorboard": "my-board", "serviceAccount": SA}, "tensorboard",
     "'my-board' is not a TensorBoard resource name"),
    ("network by name only", [pool()], {"network": "default"}, "network", "'default' is not a network name"),
    ("reserved ranges without a network", [pool()], {"reservedIpRanges": ["r-a"]}, "reservedIpRanges",
     "needs network"),
    ("service account without a domain", [pool()], {"serviceAccount": "trainer"}, "serviceAccount",
     "'trainer' is not a service account email"),
    ("A4X package on the x86 prebuilt tf-gpu image",
     [pool(machineSpec=A4X, containerSpec=None, pythonPackageSpec={**PACKAGE, "executorImageUri": TF_GPU})], {},
     "workerPoolSpecs[0].pythonPackageSpec.executorImageUri",
     (f"{TF_GPU} is a Vertex AI prebuilt image, built for linux/amd64 only; a4x-highgpu-4g has arm64 CPUs and "
      "needs an image built for linux/arm64 (vtrain build --machine-type a4x-highgpu-4g builds one)")),
    ("A4X workers running the prebuilt image as a container", [pool(image=ARM64_IMAGE, machineSpec=A4X),
                                                               pool(replicas=2, image=TF_GPU, machineSpec=A4X)],
     {}, "workerPoolSpecs[1].containerSpec.imageUri", "is a Vertex AI prebuilt image, built for linux/amd64 only"),
]


@pytest.mark.parametrize("pools,spec,path,fragment", [b[1:] for b in BAD_SCHEDULING], ids=[b[0] for b in BAD_SCHEDULING])
def test_each_scheduling_and_access_rule_is_one_line_naming_the_field(pools, spec, path, fragment):
    found = problems(job(*pools, **spec))
    assert len(found) == 1, found
    field, reason = found[0].split(": ", 1)
    assert field == path
    assert fragment in reason


H100 = pool(machine="a3-highgpu-8g", accelerator="NVIDIA_H100_80GB", accelerator_count=8)


def test_a_region_without_h100_refuses_it_naming_the_region_and_the_accelerator():
    h100 = job(H100)
    assert problems(h100) == [] and problems(h100, "us-central1") == []
    assert problems(h100, "us-west2") == [
        "workerPoolSpecs[0].machineSpec.acceleratorType: NVIDIA H100 80GB (NVIDIA_H100_80GB) is not offered for "
        "Vertex AI training in us-west2 (offered there: NVIDIA P4, NVIDIA T4, NVIDIA B200; region data of 2026-04-10, "
        "see the README)"]


def test_a_tpu_pod_slice_where_only_single_hosts_are_offered_is_refused_naming_the_region():
    v3 = [pool(machine="cloud-tpu", accelerator="TPU_V3", accelerator_count=n) for n in (8, 32)]
    assert problems(job(v3[0]), "us-central1") == [] and notices(job(v3[0]), "us-central1") == []
    assert problems(job(v3[1]), "europe-west4") == []
    assert problems(job(v3[1]), "us-central1") == [
        "workerPoolSpecs[0].machineSpec.acceleratorType: a TPU v3 Pod slice (32 cores) is not offered for Vertex AI "
        "training in us-central1, only a single host (8 cores; region data of 2026-04-10, see the README)"]


def test_a_region_vertex_does_not_train_in_is_refused():
    assert problems(job(pool()), "mars-north9") == [
        "region: Vertex AI custom training is not offered in 'mars-north9' (not one of gcloud's training regions)"]
    assert problems(job(pool()), "us-centrl1")[0].endswith("training regions; did you mean us-central1)")


def test_what_the_region_data_does_not_cover_is_allowed_with_a_notice():
    h200 = job(pool(machine="a3-ultragpu-8g", accelerator="NVIDIA_H200_141GB", accelerator_count=8))
    assert problems(h200, "europe-west8") == []
    assert notices(h200, "europe-west8") == [
        "workerPoolSpecs[0].machineSpec.acceleratorType: the workbench's region data does not cover NVIDIA_H200_141GB "
        "in europe-west8: allowed; check Google's locations page"]
    assert problems(job(H100), "europe-west8") == [] and len(notices(job(H100), "europe-west8")) == 1


@pytest.mark.parametrize("pools,spec,notice", [
    ([pool(machine="n1-standard-8", accelerator="NVIDIA_TESLA_P100", accelerator_count=1)], {},
     "workerPoolSpecs[0].machineSpec.acceleratorType: NVIDIA P100 reached end of support on 2026-09-15; choose "
     "another GPU"),
    ([pool(machine="tpu7x-standard-4t", topology="2x2x1")], {},
     "workerPoolSpecs[0].machineSpec.machineType: tpu7x-standard-4t: restricted availability (JAX workloads; ask "
     "Google for access)"),
    ([pool(machine="a4x-highgpu-4g", accelerator="NVIDIA_GB200", accelerator_count=4)], {},
     "workerPoolSpecs[0].machineSpec.machineType: a4x-highgpu-4g has arm64 CPUs: its image must be built for "
     "linux/arm64 (vtrain build --machine-type a4x-highgpu-4g)"),
    ([pool()], {"scheduling": {"strategy": "ON_DEMAND"}}, "scheduling.strategy: ON_DEMAND is deprecated; use STANDARD"),
], ids=["P100", "TPU7x", "A4X", "ON_DEMAND"])
def test_notices_are_allowed_and_name_the_field(pools, spec, notice):
    j = job(*pools, **spec)
    assert problems(j) == [] and notices(j) == [notice]


def test_a_prebuilt_image_on_a4x_is_refused_instead_of_noticed(capsys, tmp_path):
    """The refusal replaces the arm64 notice for that pool; `vtrain validate` exits 2 with the one line."""
    a4x_package = pool(machineSpec=A4X, containerSpec=None, pythonPackageSpec={**PACKAGE, "executorImageUri": TF_GPU})
    assert notices(job(a4x_package)) == []
    path = write_spec(tmp_path / "a4x.json", [a4x_package])
    code, out, err = vtrain_in_process(capsys, "validate", str(path))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        (f"vtrain: error: workerPoolSpecs[0].pythonPackageSpec.executorImageUri: {TF_GPU} is a Vertex AI prebuilt "
         "image, built for linux/amd64 only; a4x-highgpu-4g has arm64 CPUs and needs an image built for linux/arm64 "
         "(vtrain build --machine-type a4x-highgpu-4g builds one)")]
    own = write_spec(tmp_path / "own.json", [pool(machineSpec=A4X, image=ARM64_IMAGE)])
    assert vtrain_in_process(capsys, "validate", str(own)) == (
        0, "ok\n", ("vtrain: note: workerPoolSpecs[0].machineSpec.machineType: a4x-highgpu-4g has arm64 CPUs: its "
                    "image must be built for linux/arm64 (vtrain build --machine-type a4x-highgpu-4g)\n"))


def test_vtrain_validate_with_a_region_without_h100(capsys, tmp_path):
    path = write_spec(tmp_path / "h100.json", [H100])
    code, out, err = vtrain_in_process(capsys, "validate", str(path), "--region", "us-west2")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "vtrain: error: workerPoolSpecs[0].machineSpec.acceleratorType: NVIDIA H100 80GB (NVIDIA_H100_80GB) is not "
        "offered for Vertex AI training in us-west2 (offered there: NVIDIA P4, NVIDIA T4, NVIDIA B200; region data of "
        "2026-04-10, see the README)"]
    assert vtrain_in_process(capsys, "validate", str(path), "--region", "us-east4") == (0, "ok\n", "")
    assert vtrain_in_process(capsys, "validate", str(path)) == (0, "ok\n", "")  # no region: no region rules


def test_vtrain_validate_prints_notices_and_passes(capsys, tmp_path):
    path = write_spec(tmp_path / "h200.json", [pool(machine="a3-ultragpu-8g", accelerator="NVIDIA_H200_141GB",
                                                    accelerator_count=8)])
    code, out, err = vtrain_in_process(capsys, "validate", str(path), "--region", "europe-west8")
    assert (code, out) == (0, "ok\n")
    assert err == ("vtrain: note: workerPoolSpecs[0].machineSpec.acceleratorType: the workbench's region data does "
                   "not cover NVIDIA_H200_141GB in europe-west8: allowed; check Google's locations page\n")
