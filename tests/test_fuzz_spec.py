"""Property-based tests (hypothesis) over the job loader and the validator: whatever a user gives
them, the answer is a job or one WorkbenchError (a line the CLI and the magic print), never
another exception, and never a traceback from `vtrain`.

Inputs are random JSON and YAML texts, random data, and (to reach past the first checks) valid
jobs of every format with some of their values replaced by anything, and job-shaped data built
from the fields of every format with random values in them. Runs are bounded
(max_examples) and, under CI, derandomized, so the suite is deterministic there.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml
from conftest import vtrain_in_process
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_ext import validate
from jupyter_ext.errors import WorkbenchError
from jupyter_ext.names import FORMATS
from jupyter_ext.spec import JobSpec

FUZZ = settings(max_examples=200, deadline=None, derandomize=os.environ.get("CI") == "true", database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

# ---- strategies ----------------------------------------------------------------------------------------------------

SCALARS = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
           | st.sampled_from(["", "1", "-1", "2", "5000", "1e3", "abc", "n1-standard-4", "NVIDIA_TESLA_T4", "CUSTOM",
                              "BASIC", "standard", "gs://b/out", "gs://b/../x", "gs://", "3600s", "SPOT", "chief",
                              "TPU_V3", "cloud-tpu", "2x2", "gcr.io/p/t:1", "trainer.task", "$(HOME)"]))
# every field name a job description may hold, in either style, and a few that no format has
FIELDS = st.sampled_from([
    "displayName", "display_name", "jobSpec", "job_spec", "workerPoolSpecs", "worker_pool_specs", "machineSpec",
    "machine_spec", "machineType", "acceleratorType", "acceleratorCount", "tpuTopology", "replicaCount",
    "replica_count", "containerSpec", "container_spec", "imageUri", "image_uri", "command", "args", "env", "name",
    "value", "pythonPackageSpec", "executorImageUri", "packageUris", "pythonModule", "diskSpec", "bootDiskType",
    "bootDiskSizeGb", "baseOutputDirectory", "outputUriPrefix", "base_output_dir", "scheduling", "timeout",
    "strategy", "restartJobOnWorkerRestart", "serviceAccount", "network", "enableWebAccess", "labels",
    "encryptionSpec", "kmsKeyName", "encryption_spec_key_name", "reservationAffinity", "trainingInput", "jobId",
    "scaleTier", "masterType", "masterConfig", "workerType", "workerCount", "workerConfig", "parameterServerCount",
    "parameterServerType", "evaluatorCount", "evaluatorType", "useChiefInTfConfig", "jobDir", "region",
    "runtimeVersion", "pythonVersion", "hyperparameters", "goal", "params", "parameterName", "type", "minValue",
    "maxValue", "maxTrials", "maxParallelTrials", "acceleratorConfig", "count", "maxRunningTime", "maxWaitTime",
    "state", "createTime", "error", "webAccessUris", "nonsense", "<<",
])
JOB_SHAPED = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(FIELDS, children, max_size=6),
    max_leaves=40,
)
ANY_DATA = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30,
)


SPECS = Path(__file__).parent / "data" / "specs"
# a valid job in every format, with every kind of field (hyperparameters, scheduling, packages, ...)
SEEDS = [json.loads(path.read_text()) for path in sorted(SPECS.glob("*.json"))] + [
    {"displayName": "all", "labels": {"team": "a"}, "encryptionSpec": {"kmsKeyName": "k"}, "jobSpec": {
        "workerPoolSpecs": [
            {"machineSpec": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4",
                             "acceleratorCount": 1}, "replicaCount": "1", "diskSpec": {"bootDiskSizeGb": 100},
             "containerSpec": {"imageUri": "gcr.io/p/t:1", "args": ["--a"], "env": [{"name": "A", "value": "1"}]}},
            {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 2, "pythonPackageSpec": {
                "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest",
                "packageUris": ["gs://b/t.tar.gz"], "pythonModule": "trainer.task"}},
            {"machineSpec": {"machineType": "n2-standard-16"}, "replicaCount": 1, "containerSpec": {
                "imageUri": "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"}},
            {"machineSpec": {"machineType": "ct5lp-hightpu-4t", "tpuTopology": "2x2"}, "replicaCount": 1,
             "containerSpec": {"imageUri": "gcr.io/p/t:1"}}],
        "scheduling": {"timeout": "3600s", "strategy": "SPOT", "restartJobOnWorkerRestart": True},
        "serviceAccount": "sa@p.iam.gserviceaccount.com", "enableWebAccess": True,
        "baseOutputDirectory": {"outputUriPrefix": "gs://b/out"}}},
    {"jobId": "tuned", "labels": {"a": "b"}, "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "masterConfig": {"imageUri": "gcr.io/p/t:1"},
        "workerType": "standard_gpu", "workerCount": 1, "pythonModule": "trainer.task", "packageUris": ["gs://b/p"],
        "scheduling": {"maxRunningTime": "7200s"}, "encryptionConfig": {"kmsKeyName": "k"},
        "hyperparameters": {"goal": "MAXIMIZE", "hyperparameterMetricTag": "acc", "maxTrials": 4,
                            "maxParallelTrials": 2, "algorithm": "RANDOM_SEARCH", "params": [
                                {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.001, "maxValue": 0.1,
                                 "scaleType": "UNIT_LOG_SCALE"},
                                {"parameterName": "opt", "type": "CATEGORICAL", "categoricalValues": ["a", "b"]}]}}},
]


def _paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in `data` (a key of a mapping, an index of a list), the root included."""
    found = [prefix]
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    for key, value in items:
        found += _paths(value, (*prefix, key))
    return found


def _mutate(data: Any, path: tuple, value: Any, drop: bool) -> Any:
    if not path:
        return value
    data = copy.deepcopy(data)
    *parents, last = path
    holder = data
    for key in parents:
        holder = holder[key]
    if drop:
        del holder[last]
    else:
        holder[last] = value
    return data


@st.composite
def mutated_jobs(draw: st.DrawFn) -> Any:
    """A valid job with one to three of its values replaced (by anything) or removed."""
    job = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(job)))
        job = _mutate(job, path, draw(JOB_SHAPED), drop=bool(path) and draw(st.booleans()))
    return job


def top_level(format_key: str) -> st.SearchStrategy[Any]:
    """A mapping that some format's loader takes further than its first check."""
    return st.dictionaries(FIELDS, JOB_SHAPED, max_size=5).map(lambda d: {**d, format_key: d.get(format_key, [])})


JOBS = st.one_of(
    mutated_jobs(), mutated_jobs(), mutated_jobs(), JOB_SHAPED,
    top_level("workerPoolSpecs"), top_level("worker_pool_specs"), top_level("jobSpec"), top_level("trainingInput"),
    st.lists(JOB_SHAPED, max_size=5),
)


def load_or_refuse(source: Any) -> JobSpec | None:
    """The job `source` loads to, or None when it is refused with a WorkbenchError."""
    try:
        return JobSpec.load(source)
    except WorkbenchError as exc:
        assert str(exc).strip(), "an error says what is wrong"
        return None


def everything_of(job: JobSpec) -> None:
    """What every view of a loaded job asks of it: its problems, and (when it has none) every format."""
    try:
        found = validate.problems(job)
    except WorkbenchError:
        return
    assert all(isinstance(p, str) and p and "\n" not in p for p in found)
    validate.notices(job)
    if found:
        return
    for fmt in FORMATS:
        try:
            job.dump(fmt)
        except WorkbenchError:
            pass


# ---- properties ----------------------------------------------------------------------------------------------------

@FUZZ
@given(JOBS)
def test_job_shaped_data_loads_or_is_refused(data):
    job = load_or_refuse(data)
    if job is not None:
        everything_of(job)


@FUZZ
@given(ANY_DATA)
def test_any_data_loads_or_is_refused(data):
    load_or_refuse(data)


@FUZZ
@given(JOBS, st.booleans())
def test_any_json_or_yaml_text_loads_or_is_refused(data, as_yaml):
    text = yaml.safe_dump(data) if as_yaml else json.dumps(data)
    job = load_or_refuse(text if text.lstrip()[:1] in "{[" or "\n" in text.strip() else f"{text}\n\n")
    if job is not None:
        everything_of(job)


@FUZZ
@given(st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")))
def test_any_text_loads_or_is_refused(text):
    load_or_refuse(text if "\n" in text.strip() else f"{text}\n\n")  # a text, not a file name


@settings(FUZZ, max_examples=30)
@given(st.binary(max_size=200) | JOBS.map(lambda d: yaml.safe_dump(d).encode()))
def test_vtrain_validate_answers_any_file_in_one_way(capsys, content):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "job.yaml"
        path.write_bytes(content)
        code, out, err = vtrain_in_process(capsys, "validate", str(path))  # a traceback would raise here
    assert "Traceback" not in err
    if code == 0:
        assert out == "ok\n"
    else:
        assert code == 2 and out == "" and "vtrain: error: " in err  # notes (a retired GPU...) may come first
        assert all(line.startswith(("vtrain: error: ", "vtrain: note: ")) for line in err.splitlines())
