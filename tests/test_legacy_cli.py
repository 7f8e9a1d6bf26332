"""AI Platform's `trainingInput` through the CLI, as a user meets it: `vtrain convert SPEC --to legacy` keeps what a
trainingInput can hold and refuses the rest, one line naming the field (never a changed job and exit 0);
`vtrain validate` reads scale tiers by name or number and holds a job to AI Platform's rules for its roles."""

from __future__ import annotations

import json

import pytest
from conftest import pool, vtrain, vtrain_in_process, write_file

from jupyter_ext.spec import JobSpec

TRAINING = "us-docker.pkg.dev/vertex-ai/training"
NO_EQUIVALENT = "AI Platform's trainingInput has no equivalent; write the job as rest, gcloud or sdk instead"


def package_pool(module="trainer.task", args=("--role=chief",), image=f"{TRAINING}/tf-cpu.2-8:latest", replicas=1,
                 machine_spec=None, **fields):
    """A pool running a Python package (a runtimeVersion job's pool, as AI Platform ran it); `fields` are its
    pythonPackageSpec's."""
    spec = {"executorImageUri": image, "packageUris": ["gs://bkt/trainer-0.1.tar.gz"], "pythonModule": module,
            "args": list(args), **fields}
    return pool(replicas, containerSpec=None, pythonPackageSpec=spec, **({"machineSpec": machine_spec} if machine_spec
                                                                        else {}))


def convert(capsys, path, to):
    """`vtrain convert PATH --to TO` in this process: (exit code, the output as data, stderr)."""
    code, out, err = vtrain_in_process(capsys, "convert", str(path), "--to", to)
    return code, (json.loads(out) if code == 0 else None), err


def refused(capsys, path, to="legacy"):
    """The one `vtrain: error:` line of a refused conversion (exit 2, nothing written)."""
    code, out, err = vtrain_in_process(capsys, "convert", str(path), "--to", to)
    assert (code, out) == (2, ""), err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vtrain: error: "), err
    return lines[0].removeprefix("vtrain: error: ")


def round_trip(capsys, tmp_path, job):
    """The job written as legacy, then that trainingInput written back as a REST body: both as data."""
    code, legacy, err = convert(capsys, write_file(tmp_path / "job.json", job), "legacy")
    assert code == 0, err
    code, back, err = convert(capsys, write_file(tmp_path / "legacy.json", legacy), "rest")
    assert code == 0, err
    return legacy["trainingInput"], back["jobSpec"]


# ---- what a trainingInput holds is kept ---------------------------------------------------------------------------

def test_package_pools_keep_their_module_args_and_runtime_image(capsys, tmp_path):
    """The runtime image was lost (read back as tf-cpu.2-11): a runtimeVersion is what gives it."""
    gpu = {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1}
    job = {"workerPoolSpecs": [package_pool(), package_pool(replicas=2, machine_spec=gpu,
                                                            image=f"{TRAINING}/tf-gpu.2-8:latest")]}
    ti, back = round_trip(capsys, tmp_path, job)
    assert (ti["pythonModule"], ti["args"], ti["runtimeVersion"]) == ("trainer.task", ["--role=chief"], "2.8")
    assert [p["pythonPackageSpec"]["executorImageUri"] for p in back["workerPoolSpecs"]] == [
        f"{TRAINING}/tf-cpu.2-8:latest", f"{TRAINING}/tf-gpu.2-8:latest"]
    assert JobSpec.load(back).spec == JobSpec.load(job).spec  # nothing else changed either


def test_a_base_output_directory_passed_as_job_dir_becomes_the_job_dir(capsys, tmp_path):
    """AI Platform's jobDir is the output folder and `--job-dir DIR` on every replica, as the workbench reads it:
    a job that has both (a legacy job written as rest, say) becomes a jobDir and back the same."""
    flag = ["--job-dir", "gs://bkt/out"]
    job = {"workerPoolSpecs": [pool(args=["--epochs", "3", *flag]), pool(replicas=2, args=flag)],
           "baseOutputDirectory": {"outputUriPrefix": "gs://bkt/out"}}
    ti, back = round_trip(capsys, tmp_path, job)
    assert JobSpec.load(back).spec == JobSpec.load(job).spec
    assert ti["jobDir"] == "gs://bkt/out"
    assert (ti["masterConfig"]["containerArgs"], "containerArgs" in ti.get("workerConfig", {})) == (
        ["--epochs", "3"], False)
    assert back["baseOutputDirectory"] == {"outputUriPrefix": "gs://bkt/out"}
    assert [p["containerSpec"]["args"] for p in back["workerPoolSpecs"]] == [["--epochs", "3", *flag], flag]


# ---- what it cannot hold is refused, naming the field -------------------------------------------------------------

@pytest.mark.parametrize("pools, field, reason", [
    ([package_pool(), package_pool("trainer.other", ["--role=chief"])],
     "workerPoolSpecs[1].pythonPackageSpec.pythonModule", "differs from workerPoolSpecs[0]'s, and AI Platform's "
     "trainingInput has one pythonModule for every replica; write the job as rest, gcloud or sdk instead"),
    ([package_pool(), package_pool(args=["--role=worker"])],
     "workerPoolSpecs[1].pythonPackageSpec.args", "differs from workerPoolSpecs[0]'s"),
    ([package_pool(), pool(), package_pool(packageUris=["gs://bkt/other.tar.gz"])],
     "workerPoolSpecs[2].pythonPackageSpec.packageUris", "differs from workerPoolSpecs[0]'s"),
    ([package_pool(env=[{"name": "MYSECRET", "value": "s3cret"}])],
     "workerPoolSpecs[0].pythonPackageSpec.env", NO_EQUIVALENT),
    ([pool(), pool(env={"MYSECRET": "s3cret"})], "workerPoolSpecs[1].containerSpec.env", NO_EQUIVALENT),
    ([package_pool(image=f"{TRAINING}/tf-cpu.2-17.py310:latest")],
     "workerPoolSpecs[0].pythonPackageSpec.executorImageUri", "AI Platform's trainingInput has no image for a "
     f"Python package: a runtimeVersion gives only {TRAINING}/tf-cpu.M-N:latest (tf-gpu with accelerators)"),
    ([package_pool(), package_pool(image=f"{TRAINING}/pytorch-xla.2-4.py310:latest")],
     "workerPoolSpecs[1].pythonPackageSpec.executorImageUri", "AI Platform's trainingInput has no image for a "
     "Python package"),
    ([pool(replicas=2)], "workerPoolSpecs[0].replicaCount", "AI Platform's trainingInput has one master replica"),
    # caught by reading the trainingInput back: what no check above names is still never dropped
    ([pool(machine="ct5lp-hightpu-4t", topology="2x2")], "workerPoolSpecs[0].machineSpec.tpuTopology",
     "AI Platform's trainingInput cannot hold it as it is; write the job as rest, gcloud or sdk instead"),
], ids=["module", "args", "packageUris", "package env", "container env", "image no runtime gives",
        "second image", "two masters", "tpuTopology"])
def test_what_a_training_input_cannot_hold_is_refused_naming_the_field(capsys, tmp_path, pools, field, reason):
    message = refused(capsys, write_file(tmp_path / "job.yaml", {"workerPoolSpecs": pools}))
    assert message.startswith(f"{field}: {reason}"), message


def test_the_testers_job_is_refused_as_a_user_runs_it(tmp_path):
    """Two pools running different modules and images, with env and an output folder: exit 0 with the second
    pool's module and args as the whole job's, both images and the env and folder gone."""
    chief = package_pool(image=f"{TRAINING}/tf-cpu.2-17.py310:latest", env=[{"name": "MYSECRET", "value": "x"}])
    worker = package_pool("trainer.other", ["--role=worker"], f"{TRAINING}/pytorch-xla.2-4.py310:latest")
    job = write_file(tmp_path / "job.yaml", {"workerPoolSpecs": [chief, worker],
                                             "baseOutputDirectory": {"outputUriPrefix": "gs://bkt/out"}})
    done = vtrain("convert", str(job), "--to", "legacy", timeout=60)
    assert (done.returncode, done.stdout) == (2, ""), done.stdout
    assert done.stderr == f"vtrain: error: workerPoolSpecs[0].pythonPackageSpec.env: {NO_EQUIVALENT}\n"


@pytest.mark.parametrize("args", [[], ["--job-dir", "gs://bkt/elsewhere"]], ids=["no flag", "another folder"])
def test_a_base_output_directory_a_job_dir_would_change_is_refused(capsys, tmp_path, args):
    """A jobDir would also pass --job-dir to every replica, which their args do not say: refused, not dropped."""
    job = write_file(tmp_path / "job.json", {"displayName": "out", "jobSpec": {
        "workerPoolSpecs": [pool(args=args)], "baseOutputDirectory": {"outputUriPrefix": "gs://bkt/out"}}})
    assert refused(capsys, job) == (
        "baseOutputDirectory.outputUriPrefix: a trainingInput holds it only as jobDir, which also passes --job-dir "
        "gs://bkt/out to every replica: end each pool's args with those two to keep it (workerPoolSpecs[0]'s do "
        "not), or write the job as rest, gcloud or sdk instead")


# ---- reading a trainingInput: scale tiers by number, AI Platform's rules for roles ----------------------------------

def legacy_file(tmp_path, **training_input):
    base = {"masterConfig": {"imageUri": "gcr.io/p/trainer:1"}}
    return write_file(tmp_path / "legacy.yaml", {"jobId": "census", "trainingInput": {**base, **training_input}})


@pytest.mark.parametrize("tier, pools", [
    (0, [("n1-highmem-8", "1")]), ("0", [("n1-highmem-8", "1")]),  # BASIC: the master alone
    (5, [("n1-highmem-8", "1"), ("n1-highmem-8", "2")]),  # CUSTOM
], ids=["0", "'0'", "5"])
def test_a_scale_tier_given_by_number_is_read_as_its_name(capsys, tmp_path, tier, pools):
    """AI Platform's TrainingInput.ScaleTier numbers (google/cloud/ml/v1/job_service.proto): BASIC 0, CUSTOM 5."""
    path = legacy_file(tmp_path, scaleTier=tier, masterType="large_model", workerType="large_model", workerCount=2)
    code, body, err = convert(capsys, path, "rest")
    assert code == 0, err
    assert [(p["machineSpec"]["machineType"], p["replicaCount"]) for p in body["jobSpec"]["workerPoolSpecs"]] == pools


@pytest.mark.parametrize("tier, message", [
    (3, "trainingInput.scaleTier: PREMIUM_1 is not supported (its machines are not published)"),
    (6, "trainingInput.scaleTier: BASIC_GPU is not supported"),
    (7, "trainingInput.scaleTier: invalid value 7: write the tier's name (its number is not known here; known: "
        "0 BASIC, 1 STANDARD_1, 3 PREMIUM_1, 6 BASIC_GPU, 5 CUSTOM)"),
    ("FAST", "trainingInput.scaleTier: invalid value 'FAST' (valid: BASIC, STANDARD_1, PREMIUM_1, BASIC_GPU, "
             "BASIC_TPU, CUSTOM)"),
])
def test_a_scale_tier_number_names_its_tier_or_asks_for_the_name(capsys, tmp_path, tier, message):
    code, out, err = vtrain_in_process(capsys, "validate", str(legacy_file(tmp_path, scaleTier=tier)))
    assert (code, out) == (2, "") and err.startswith(f"vtrain: error: {message}") and len(err.splitlines()) == 1, err


def test_an_accelerator_given_by_number_asks_for_its_name(capsys, tmp_path):
    """AI Platform numbered its accelerators apart from Vertex AI, and those numbers are not known here."""
    path = legacy_file(tmp_path, scaleTier="CUSTOM", masterType="n1-standard-8",
                       masterConfig={"imageUri": "gcr.io/p/trainer:1", "acceleratorConfig": {"type": 4, "count": 1}})
    code, out, err = vtrain_in_process(capsys, "validate", str(path))
    assert (code, out) == (2, "")
    assert err.startswith("vtrain: error: trainingInput.masterConfig.acceleratorConfig.type: invalid value 4: write "
                          "the accelerator's name"), err


@pytest.mark.parametrize("role", ["worker", "parameterServer", "evaluator"])
def test_a_role_count_without_its_machine_type_is_refused(tmp_path, role):
    """AI Platform required workerType when workerCount > 0 in the CUSTOM tier (and so for parameter servers and
    evaluators); the workbench gave them the master's machine instead."""
    path = legacy_file(tmp_path, scaleTier="CUSTOM", masterType="standard", **{f"{role}Count": 2})
    done = vtrain("validate", str(path), timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"vtrain: error: trainingInput.{role}Type: required when {role}Count is more than 0 "
                           "(scaleTier CUSTOM)\n")
    with_type = legacy_file(tmp_path, scaleTier="CUSTOM", masterType="standard", **{f"{role}Count": 2,
                                                                                    f"{role}Type": "large_model"})
    assert vtrain("validate", str(with_type), timeout=60).stdout == "ok\n"
    no_replicas = legacy_file(tmp_path, scaleTier="CUSTOM", masterType="standard", **{f"{role}Count": "0"})
    assert vtrain("validate", str(no_replicas), timeout=60).stdout == "ok\n"
