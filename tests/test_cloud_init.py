"""What `aiplatform.init` and the environment set reaches Vertex AI, end to end: the real SDK's
settings read by the magic, and the real CLI, against the local service standing in for Vertex AI
(recording every request, so the bodies Vertex AI would get are seen) and the Cloud Storage
emulator. Where jobs go is resolved as the README's "Where jobs run" says (unit tests:
test_target)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from google.cloud.aiplatform_v1 import types as v1

from conftest import created_jobs, point_sdk_at, pool, recorded_requests, vtrain, write_file
from jupyter_ext.launch.target import ENDPOINT_VARIABLE
from jupyter_ext.service import daemon
from jupyter_ext.service.emulation import Options

CELL = "print('cell ran')\n"
IMAGE = "us-docker.pkg.dev/p/r/trainer:1"
KEY = "projects/my-project/locations/us-central1/keyRings/k/cryptoKeys/c"
PLACE_VARIABLES = ("GOOGLE_CLOUD_PROJECT", "CLOUD_ML_REGION", ENDPOINT_VARIABLE, "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE")


@pytest.fixture(scope="module")
def stand_in(module_home: Path, gcs_emulator: Any) -> Iterator[dict[str, Any]]:
    """The local service as Vertex AI's endpoint, reading gs:// packages from the emulator."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in gcs_emulator.env().items():
            patch.setenv(name, value)
        yield daemon.ensure_running(Options(record_requests=True))


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in PLACE_VARIABLES:  # only what a test sets
        monkeypatch.delenv(name, raising=False)
    return module_home


@pytest.fixture
def init(stand_in: dict[str, Any]) -> Iterator[Callable[..., None]]:
    """`aiplatform.init` at the stand-in, in project my-project, with a test's own settings; reset after."""
    from google.cloud.aiplatform import initializer

    initializer.global_config.__init__()
    yield lambda **settings: point_sdk_at(stand_in, project="my-project", api_transport="rest", **settings)
    initializer.global_config.__init__()


def _cell_job(ip: Any, flags: str) -> tuple[Any, str, dict[str, Any]]:
    """Run the cell on "Vertex AI" with these flags: its handle, and the path and body of the request."""
    before = len(recorded_requests())
    ip.run_cell_magic("vertex_train", f"{flags} job", CELL)
    monitor = ip.magics_manager.registry["VertexTrainMagics"].monitor
    assert monitor.state == "JOB_STATE_SUCCEEDED", monitor.error
    ((path, body),) = created_jobs(before)
    return ip.user_ns["job"], path, body


def test_a_location_of_aiplatform_init_is_where_the_job_is(ipython: Any, init: Any, gcs: Any) -> None:
    init(location="europe-west4")
    handle, path, _ = _cell_job(ipython, f"--vertex --staging-bucket gs://{gcs.bucket.name}")
    assert handle.name.startswith("projects/my-project/locations/europe-west4/customJobs/")
    assert path == "/v1/projects/my-project/locations/europe-west4/customJobs"


def test_the_staging_bucket_of_aiplatform_init_alone_takes_the_package(ipython: Any, init: Any, gcs: Any) -> None:
    bucket = gcs.bucket.name
    init(staging_bucket=f"gs://{bucket}")
    _, _, body = _cell_job(ipython, "--vertex")  # no --staging-bucket
    (sdist,) = [blob.name for blob in gcs.client.list_blobs(bucket)]
    assert sdist.startswith("vertex-workbench/packages/") and sdist.endswith("/trainer-0.1.tar.gz")
    uris = {uri for spec in body["jobSpec"]["workerPoolSpecs"] for uri in spec["pythonPackageSpec"]["packageUris"]}
    assert uris == {f"gs://{bucket}/{sdist}"}
    assert body["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"].startswith(
        f"gs://{bucket}/aiplatform-custom-job-")


def test_network_service_account_and_key_of_aiplatform_init_fill_the_job(ipython: Any, init: Any, gcs: Any) -> None:
    init(network="projects/123/global/networks/default", service_account="trainer@my-project.iam.gserviceaccount.com",
         encryption_spec_key_name=KEY)
    _, _, body = _cell_job(ipython, f"--vertex --staging-bucket gs://{gcs.bucket.name}")
    # the client's REST transport sends enums as numbers; read the body as Vertex AI does
    sent = v1.CustomJob.from_json(json.dumps(body), ignore_unknown_fields=False)
    assert sent.job_spec.network == "projects/123/global/networks/default"
    assert sent.job_spec.service_account == "trainer@my-project.iam.gserviceaccount.com"
    assert sent.encryption_spec.kms_key_name == KEY


def test_credentials_of_aiplatform_init_come_before_gclouds_token_file(ipython: Any, init: Any, gcs: Any,
                                                                        tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    init()  # the stand-in's token as credentials
    stale = tmp_path / "stale-token"
    stale.write_text("a-token-the-service-refuses")
    monkeypatch.setenv("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", str(stale))
    handle, path, _ = _cell_job(ipython, f"--vertex --staging-bucket gs://{gcs.bucket.name}")
    assert path == "/v1/projects/my-project/locations/us-central1/customJobs"


def test_the_magic_reaches_vertex_with_its_own_endpoint_and_token_flags(ipython: Any, init: Any, gcs: Any,
                                                                       stand_in: dict[str, Any]) -> None:
    """No aiplatform.init: the flags alone say where and as whom, as for `vtrain`."""
    handle, path, _ = _cell_job(ipython, f"--project flag-project --staging-bucket gs://{gcs.bucket.name} "
                                         f"--endpoint {stand_in['endpoint']} --access-token-file "
                                         f"{stand_in['token_file']}")
    assert path == "/v1/projects/flag-project/locations/us-central1/customJobs"
    assert handle.name.startswith("projects/flag-project/locations/us-central1/customJobs/")


def _submit(spec: Path, *flags: str, env: dict[str, str] | None = None) -> tuple[str, list[tuple[str, dict]]]:
    """`vtrain submit` of a job file: what it printed, and the creation requests it made."""
    before = len(recorded_requests())
    done = vtrain("submit", str(spec), *flags, env=env or {})
    assert done.returncode == 0, done.stderr
    return done.stdout, created_jobs(before)


def _at(stand_in: dict[str, Any]) -> list[str]:
    return ["--endpoint", stand_in["endpoint"], "--access-token-file", stand_in["token_file"]]


def test_a_jobs_own_encryption_key_and_service_account_reach_the_request_unchanged(
        stand_in: dict[str, Any], tmp_path: Path) -> None:
    job = {"displayName": "own-fields", "encryptionSpec": {"kmsKeyName": KEY},
           "jobSpec": {"workerPoolSpecs": [pool(1, command=["python", "-c", "print('ok')"], image=IMAGE)],
                       "serviceAccount": "own@my-project.iam.gserviceaccount.com"}}
    _, ((_, body),) = _submit(write_file(tmp_path / "job.json", job), "--project", "my-project", *_at(stand_in))
    assert body["encryptionSpec"] == {"kmsKeyName": KEY}
    assert body["jobSpec"]["serviceAccount"] == "own@my-project.iam.gserviceaccount.com"


def test_a_legacy_training_input_reaches_the_request_unchanged(stand_in: dict[str, Any], tmp_path: Path) -> None:
    legacy = {"jobId": "legacy_tuned", "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4",
        "masterConfig": {"imageUri": IMAGE, "containerCommand": ["python", "-c", "print('trial')"]},
        "serviceAccount": "legacy@my-project.iam.gserviceaccount.com",
        "scheduling": {"maxRunningTime": "7200s"},
        "hyperparameters": {"goal": "MINIMIZE", "hyperparameterMetricTag": "loss", "maxTrials": 2,
                            "maxParallelTrials": 1, "params": [{"parameterName": "lr", "type": "DOUBLE",
                                                                "minValue": 0.001, "maxValue": 0.1,
                                                                "scaleType": "UNIT_LOG_SCALE"}]}}}
    _, ((path, body),) = _submit(write_file(tmp_path / "legacy.yaml", legacy), "--project", "my-project",
                                 *_at(stand_in))
    assert path == "/v1/projects/my-project/locations/us-central1/hyperparameterTuningJobs"
    sent = v1.HyperparameterTuningJob.from_json(json.dumps(body), ignore_unknown_fields=False)
    (metric,) = sent.study_spec.metrics
    assert (metric.metric_id, metric.goal) == ("loss", v1.StudySpec.MetricSpec.GoalType.MINIMIZE)
    (param,) = sent.study_spec.parameters
    assert (param.parameter_id, param.double_value_spec.min_value, param.double_value_spec.max_value) == (
        "lr", 0.001, 0.1)
    assert param.scale_type == v1.StudySpec.ParameterSpec.ScaleType.UNIT_LOG_SCALE
    assert (sent.max_trial_count, sent.parallel_trial_count) == (2, 1)
    trial = sent.trial_job_spec
    assert trial.service_account == "legacy@my-project.iam.gserviceaccount.com"
    assert trial.scheduling.timeout.total_seconds() == 7200
    (primary,) = trial.worker_pool_specs
    assert primary.machine_spec.machine_type == "n1-standard-4" and primary.replica_count == 1
    assert (primary.container_spec.image_uri, list(primary.container_spec.command)) == (
        IMAGE, ["python", "-c", "print('trial')"])


def test_the_environment_alone_names_the_project_and_the_endpoint(stand_in: dict[str, Any], tmp_path: Path) -> None:
    """$GOOGLE_CLOUD_PROJECT without --project; gcloud's endpoint override (a URL with a path) and
    token file without --endpoint and --access-token-file."""
    spec = write_file(tmp_path / "job.yaml", {"workerPoolSpecs": [pool(1, command=["python", "-c", "pass"],
                                                                       image=IMAGE)]})
    out, ((path, _),) = _submit(spec, "--vertex", env={
        "GOOGLE_CLOUD_PROJECT": "env-project", ENDPOINT_VARIABLE: stand_in["endpoint"] + "/",
        "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": stand_in["token_file"]})
    assert path == "/v1/projects/env-project/locations/us-central1/customJobs"
    assert out.startswith("submitted projects/env-project/locations/us-central1/customJobs/")


def test_the_hints_vtrain_prints_reach_the_same_vertex_ai(stand_in: dict[str, Any], tmp_path: Path) -> None:
    """What `vtrain submit` says to run next names the place the job went, so running it finds the job."""
    import shlex

    job = {"displayName": "hinted", "jobSpec": {"workerPoolSpecs": [
        pool(1, command=["python", "-c", "print('hello from vertex')"], image=IMAGE)]}}
    printed, _ = _submit(write_file(tmp_path / "job.json", job), "--project", "my-project", *_at(stand_in))
    hint = printed.split("follow it with: ", 1)[1].strip()
    assert hint.endswith(f"--project my-project --region us-central1 --endpoint {stand_in['endpoint']}")
    argv = shlex.split(hint)[1:] + ["--access-token-file", stand_in["token_file"]]  # the token stays the user's
    followed = vtrain(*argv)
    assert followed.returncode == 0 and "hello from vertex" in followed.stdout, followed.stderr
