"""The Vertex AI path end to end, offline: the real google-cloud-aiplatform, -logging and -storage
clients, the local service standing in for Vertex AI's endpoint (with `--record-requests`, so the
bodies Vertex AI would get are seen), a Cloud Storage emulator, and the test registry for images.
What differs from a run against Google is only the endpoint, the credentials and the emulator's
address."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from google.cloud.aiplatform_v1 import types as v1

from conftest import created_jobs, pool, recorded_requests, vtrain
from jupyter_ext import launch
from jupyter_ext.service import daemon
from jupyter_ext.service.emulation import Options

CELL = """\
import json, os, sys
task = json.loads(os.environ["CLUSTER_SPEC"])["task"]
print("cell on", task["type"], task["index"], "args", sys.argv[1:], flush=True)
"""
PREBUILT = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"


@pytest.fixture(scope="module")
def cloud(module_home: Path, gcs_emulator: Any, docker_services: Any) -> Iterator[dict[str, Any]]:
    """The local service as Vertex AI's endpoint, started with Cloud Storage at the emulator and the
    test Docker engine (its replicas read gs:// packages and pull images as Vertex AI's would), and
    the SDK pointed at it with a project, a region and a token."""
    from google.cloud import aiplatform
    from google.cloud.aiplatform import initializer
    from google.oauth2.credentials import Credentials

    with pytest.MonkeyPatch.context() as patch:
        for name, value in {**gcs_emulator.env(), "DOCKER_HOST": docker_services.engine_url}.items():
            patch.setenv(name, value)
        info = daemon.ensure_running(Options(record_requests=True))
        token = module_home / "token-copy"
        token.write_text(daemon.read_token())
        aiplatform.init(project="my-project", location="us-central1", api_endpoint=info["endpoint"],
                        api_transport="rest", credentials=Credentials(token=daemon.read_token()))
        yield {**info, "token_file": str(token), "emulator": gcs_emulator, "docker": docker_services}
        initializer.global_config.__init__()


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path) -> Path:
    return module_home


@pytest.fixture
def bucket(cloud: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A fresh bucket in the emulator, and the emulator in this process's environment."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    for name, value in cloud["emulator"].env().items():
        monkeypatch.setenv(name, value)
    client = storage.Client(project="test", credentials=AnonymousCredentials())
    yield client.bucket(cloud["emulator"].create_bucket("staging"))


def _objects(bucket: Any) -> list[str]:
    return [blob.name for blob in bucket.client.list_blobs(bucket.name)]


def _sdist_members(bucket: Any, name: str) -> dict[str, bytes]:
    data = bucket.blob(name).download_as_bytes()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def ip(cloud: dict[str, Any], ipython: Any) -> Any:
    return ipython


def test_a_cell_goes_to_vertex_as_a_package_in_the_bucket_without_docker(ip: Any, bucket: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")  # no engine: the cell must not need one
    before = len(recorded_requests())
    ip.run_cell_magic("vertex_train", f'--vertex --staging-bucket gs://{bucket.name} --workers 2 '
                      f'--requirements pandas --args "--lr 0.1" job', CELL)
    handle = ip.user_ns["job"]
    monitor = ip.magics_manager.registry["VertexTrainMagics"].monitor
    assert monitor.state == "JOB_STATE_SUCCEEDED", monitor.error
    assert handle.target.project == "my-project" and not handle.target.local
    texts = sorted(line.text for line in monitor.buffer.lines())
    assert texts == [f"cell on workerpool{p} {i} args ['--lr', '0.1']" for p, i in ((0, 0), (1, 0), (1, 1))]
    (sdist,) = _objects(bucket)
    assert sdist.startswith("vertex-workbench/packages/") and sdist.endswith("/trainer-0.1.tar.gz")
    members = _sdist_members(bucket, sdist)
    assert b"install_requires=['pandas']" in members["trainer-0.1/setup.py"]  # as Vertex AI installs them
    assert b"cell on" in members["trainer-0.1/trainer/task.py"]
    ((_, body),) = created_jobs(before)
    for spec in body["jobSpec"]["workerPoolSpecs"]:
        package = spec["pythonPackageSpec"]
        assert package["packageUris"] == [f"gs://{bucket.name}/{sdist}"]
        assert package["executorImageUri"] == PREBUILT and package["pythonModule"] == "trainer.task"


def test_a_cell_with_an_image_goes_through_the_registry(ip: Any, bucket: Any, cloud: dict[str, Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    docker = cloud["docker"]
    for name, value in docker.env().items():
        monkeypatch.setenv(name, value)
    before = len(recorded_requests())
    repository = f"{docker.registry}/cloud-path/trainer"
    ip.run_cell_magic("vertex_train", f"--vertex --staging-bucket gs://{bucket.name} --workers 2 "
                      f"--image {repository} --base-image {docker.base_image} job", CELL)
    monitor = ip.magics_manager.registry["VertexTrainMagics"].monitor
    assert monitor.state == "JOB_STATE_SUCCEEDED", monitor.error
    assert sorted(line.text for line in monitor.buffer.lines()) == [
        "cell on workerpool0 0 args []", "cell on workerpool1 0 args []", "cell on workerpool1 1 args []"]
    ((_, body),) = created_jobs(before)
    images = {spec["containerSpec"]["imageUri"] for spec in body["jobSpec"]["workerPoolSpecs"]}
    assert len(images) == 1 and images.pop().startswith(repository + "@sha256:")  # pushed, named by digest
    assert _objects(bucket) == []  # an image job uploads no package


def test_the_sdks_from_local_script_runs_against_the_service(cloud: dict[str, Any], bucket: Any,
                                                            tmp_path: Path, fast_sdk_polling: None) -> None:
    from google.cloud import aiplatform
    from google.cloud import logging as cloud_logging
    from google.oauth2.credentials import Credentials

    script = tmp_path / "train.py"
    script.write_text(CELL)
    job = aiplatform.CustomJob.from_local_script(display_name="from-local-script", script_path=str(script),
                                                 container_uri=PREBUILT, replica_count=2, args=["--epochs", "1"],
                                                 staging_bucket=f"gs://{bucket.name}")
    job.run()
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    (staged,) = _objects(bucket)
    assert staged.endswith("aiplatform_custom_trainer_script-0.1.tar.gz")
    logs = cloud_logging.Client(project="my-project", credentials=Credentials(token=daemon.read_token()),
                                _use_grpc=False, client_options={"api_endpoint": cloud["endpoint"]})
    job_id = job.resource_name.rsplit("/", 1)[1]
    entries = list(logs.list_entries(filter_=launch.log_filter(job_id) + ' AND timestamp>="2020-01-01T00:00:00Z"'))
    assert sorted(e.payload for e in entries) == ["cell on workerpool0 0 args ['--epochs', '1']",
                                                  "cell on workerpool1 0 args ['--epochs', '1']"]


def test_vtrain_submit_uploads_local_packages_and_rewrites_them(cloud: dict[str, Any], bucket: Any,
                                                               tmp_path: Path) -> None:
    (tmp_path / "pkg" / "trainer").mkdir(parents=True)
    (tmp_path / "pkg" / "trainer" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "trainer" / "task.py").write_text(CELL)
    package = {"executorImageUri": PREBUILT, "packageUris": ["pkg"], "pythonModule": "trainer.task"}
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({"workerPoolSpecs": [pool(1, containerSpec=None, pythonPackageSpec=package),
                                                        pool(2, containerSpec=None, pythonPackageSpec=package)]}))
    before = len(recorded_requests())
    done = vtrain("submit", str(spec), "--project", "other-project", "--region", "europe-west4", "--staging-bucket",
                  f"gs://{bucket.name}/runs", "--endpoint", cloud["endpoint"], "--access-token-file",
                  cloud["token_file"], "--follow", timeout=300)
    assert done.returncode == 0, done.stderr
    assert "SUCCEEDED" in done.stdout and done.stdout.count("cell on") == 3
    (staged,) = _objects(bucket)
    assert staged.startswith("runs/vertex-workbench/packages/")
    ((_, body),) = created_jobs(before)
    uris = {uri for spec in body["jobSpec"]["workerPoolSpecs"] for uri in spec["pythonPackageSpec"]["packageUris"]}
    assert uris == {f"gs://{bucket.name}/{staged}"}
    # outputs go under the staging bucket, as the SDK names the folder
    assert body["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"].startswith(
        f"gs://{bucket.name}/runs/aiplatform-custom-job-")


def _wheel(path: Path) -> Path:
    """A pure wheel holding `trainer/task.py` (a wheel is a zip: replicas import from it)."""
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("trainer/__init__.py", "")
        wheel.writestr("trainer/task.py", CELL)
        wheel.writestr("trainer-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: trainer\nVersion: 0.1\n")
        wheel.writestr("trainer-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr("trainer-0.1.dist-info/RECORD", "")
    return path


def _sdist(path: Path, folder: Path) -> Path:
    from jupyter_ext import packaging

    (folder / "trainer").mkdir(parents=True)
    (folder / "trainer" / "task.py").write_text(CELL)
    name, data = packaging.sdist(packaging.build_context(folder))
    (path / name).write_bytes(data)
    return path / name


@pytest.mark.parametrize("kind", ["sdist", "wheel"])
def test_vtrain_submit_uploads_a_local_sdist_or_wheel_once(cloud: dict[str, Any], bucket: Any, tmp_path: Path,
                                                          kind: str) -> None:
    built = _sdist(tmp_path, tmp_path / "src") if kind == "sdist" else _wheel(tmp_path / "trainer-0.1-py3-none-any.whl")
    package = {"executorImageUri": PREBUILT, "packageUris": [built.name], "pythonModule": "trainer.task"}
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({"workerPoolSpecs": [pool(1, containerSpec=None, pythonPackageSpec=package)]}))
    before = len(recorded_requests())
    for _ in range(2):  # the second time, the same content is already in the bucket
        done = vtrain("submit", str(spec), "--project", "my-project", "--staging-bucket", f"gs://{bucket.name}",
                      "--endpoint", cloud["endpoint"], "--access-token-file", cloud["token_file"], "--follow",
                      timeout=300)
        assert done.returncode == 0, done.stderr
        assert "SUCCEEDED" in done.stdout and "cell on workerpool0 0" in done.stdout
    (staged,) = _objects(bucket)
    assert staged.endswith(f"/{built.name}") and bucket.blob(staged).download_as_bytes() == built.read_bytes()
    bodies = [body for _, body in created_jobs(before)]
    assert len(bodies) == 2 and all(body["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["packageUris"] ==
                                    [f"gs://{bucket.name}/{staged}"] for body in bodies)


GOOD_IMAGE = "us-docker.pkg.dev/p/r/trainer:1"


@pytest.mark.parametrize("change, field", [
    ({"bucket": "my-bucket"}, "--staging-bucket"),
    ({"bucket": None}, "workerPoolSpecs[0].pythonPackageSpec.packageUris[0]"),
    ({"outputs": "/tmp/outputs"}, "baseOutputDirectory.outputUriPrefix"),
    ({"outputs": "file:///tmp/outputs"}, "baseOutputDirectory.outputUriPrefix"),
    ({"labels": {"vtrain-backend": "docker"}}, "labels.vtrain-backend"),
    ({"command": "{cwd}/train.py"}, "workerPoolSpecs[1].containerSpec.command[0]"),
    ({"command": "{data}/jobs/1/train.py"}, "workerPoolSpecs[1].containerSpec.command[0]"),
    ({"packages": ["pkg", "gone.tar.gz"]}, "workerPoolSpecs[0].pythonPackageSpec.packageUris[1]"),
    ({"executor": "python:3.11"}, "workerPoolSpecs[0].pythonPackageSpec.executorImageUri"),
    ({"image": "localhost:5000/trainer:1"}, "workerPoolSpecs[1].containerSpec.imageUri"),
    ({"image": "trainer:1"}, "workerPoolSpecs[1].containerSpec.imageUri"),
    ({"image": "tensorflow/tensorflow:2.15.0", "says": "write docker.io/tensorflow/tensorflow:2.15.0"},
     "workerPoolSpecs[1].containerSpec.imageUri"),
], ids=["bucket", "no-bucket", "outputs", "file-outputs", "backend-label", "command-in-cwd", "command-in-data-folder",
        "package-left-local", "not-prebuilt", "localhost-image", "unqualified-image", "hub-name-without-host"])
def test_preflight_refuses_what_vertex_cannot_run_before_anything_is_sent(
        cloud: dict[str, Any], bucket: Any, tmp_path: Path, change: dict[str, Any], field: str,
        request: pytest.FixtureRequest) -> None:
    """`vtrain submit` to the local service with the emulator's bucket and a local package, so that a
    job with no bad field is uploaded and created; with one bad field: one line naming it, exit 2,
    nothing uploaded, nothing created. The CLI runs in another workbench home, where the service is
    not known as this machine's: to it the endpoint is Google's, so images are checked too."""
    name = "refused-" + request.node.callspec.id
    data, work = tmp_path / "workbench-home", tmp_path / "work"
    (work / "pkg" / "trainer").mkdir(parents=True)
    (work / "pkg" / "trainer" / "task.py").write_text(CELL)
    package = {"executorImageUri": change.get("executor", PREBUILT), "packageUris": change.get("packages", ["pkg"]),
               "pythonModule": "trainer.task"}
    pools = [pool(1, containerSpec=None, pythonPackageSpec=package)]
    if "command" in change or "image" in change:
        command = change.get("command", "python").format(cwd=work, data=data)
        pools.append(pool(1, command=[command, "-c", "pass"], image=change.get("image", GOOD_IMAGE)))
    body: dict[str, Any] = {"displayName": name, "labels": change.get("labels", {}),
                            "jobSpec": {"workerPoolSpecs": pools}}
    if "outputs" in change:
        body["jobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": change["outputs"]}
    (work / "job.yaml").write_text(yaml.safe_dump(body))
    staging = change.get("bucket", f"gs://{bucket.name}/runs")
    before = len(recorded_requests())
    done = vtrain("submit", "job.yaml", "--endpoint", cloud["endpoint"], "--access-token-file", cloud["token_file"],
                  "--project", "p", "--region", "us-central1", *(["--staging-bucket", staging] if staging else []),
                  cwd=work, env={"VTRAIN_HOME": str(data)})
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"vtrain: error: {field}: "), lines
    assert change.get("says", "") in lines[0]
    assert _objects(bucket) == [] and len(recorded_requests()) == before
    target = launch.Target.resolve(project="p", region="us-central1", endpoint=cloud["endpoint"],
                                   access_token_file=cloud["token_file"])
    assert name not in {job.display_name for job in launch.list_jobs(target)}


def test_the_magic_checks_before_it_builds_or_uploads(ip: Any, bucket: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With Google's endpoint (aiplatform.init without api_endpoint), an image only this machine has is
    refused before anything is built; a bad staging bucket before anything is uploaded."""
    from google.cloud.aiplatform import initializer
    from IPython.core.error import UsageError

    monkeypatch.setattr(initializer.global_config, "_api_endpoint", None)
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")  # a build would fail differently
    before = len(recorded_requests())
    with pytest.raises(UsageError, match=r"workerPoolSpecs\[0\]\.containerSpec\.imageUri: 'localhost:5000/t' is "
                                         "only on this machine"):
        ip.run_cell_magic("vertex_train", "--vertex --image localhost:5000/t", CELL)
    with pytest.raises(UsageError, match=r"--staging-bucket: 'bucket' is not a Cloud Storage URI"):
        ip.run_cell_magic("vertex_train", "--vertex --staging-bucket bucket", CELL)
    assert _objects(bucket) == [] and len(recorded_requests()) == before


def test_every_field_reaches_the_request_vertex_would_get(cloud: dict[str, Any]) -> None:
    """aiplatform.init's encryption key, service account and network fill what the job leaves open;
    the job's own fields reach the body unchanged; the body parses with unknown fields refused."""
    from google.cloud import aiplatform
    from google.cloud.aiplatform import initializer

    saved = {name: getattr(initializer.global_config, f"_{name}")
             for name in ("encryption_spec_key_name", "service_account", "network")}
    key = "projects/my-project/locations/us-central1/keyRings/k/cryptoKeys/c"
    aiplatform.init(encryption_spec_key_name=key, service_account="trainer@my-project.iam.gserviceaccount.com",
                    network="projects/123/global/networks/default")
    try:
        job = {"displayName": "all-fields", "labels": {"team": "vision"},
               "jobSpec": {"workerPoolSpecs": [pool(1, command=["python", "-c", "print('ok')"],
                                                     image="us-docker.pkg.dev/p/r/t:1")],
                           "scheduling": {"timeout": "3600s", "restartJobOnWorkerRestart": True},
                           "network": "projects/123/global/networks/mine",
                           "baseOutputDirectory": {"outputUriPrefix": "gs://out/run"}}}
        before = len(recorded_requests())
        handle = launch.submit(job, launch.Target.resolve(vertex=True))
        assert handle.wait(60) == "JOB_STATE_SUCCEEDED"
        ((_, body),) = created_jobs(before)
    finally:
        for name, value in saved.items():
            setattr(initializer.global_config, f"_{name}", value)
    sent = v1.CustomJob.from_json(json.dumps(body), ignore_unknown_fields=False)
    assert sent.encryption_spec.kms_key_name == key
    assert sent.labels == {"team": "vision"} and sent.display_name == "all-fields"
    spec = sent.job_spec
    assert spec.service_account == "trainer@my-project.iam.gserviceaccount.com"
    assert spec.network == "projects/123/global/networks/mine"  # the job's own wins over aiplatform.init's
    assert spec.scheduling.timeout.total_seconds() == 3600 and spec.scheduling.restart_job_on_worker_restart
    assert spec.base_output_directory.output_uri_prefix == "gs://out/run"
    assert spec.worker_pool_specs[0].container_spec.command[-1] == "print('ok')"


SCHEDULING_FLAGS = ["--strategy", "SPOT", "--timeout", "90m", "--disable-retries", "--service-account",
                    "trainer@my-project.iam.gserviceaccount.com", "--network", "projects/123/global/networks/vpc",
                    "--reserved-ip-ranges", "range-a,range-b", "--enable-web-access", "--enable-dashboard-access",
                    "--tensorboard", "projects/my-project/locations/us-central1/tensorboards/42",
                    "--reservation", "projects/my-project/zones/us-central1-a/reservations/r1",
                    "--persistent-resource-id", "pool-1"]


def test_scheduling_and_access_flags_reach_the_request_unchanged(cloud: dict[str, Any], tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({"workerPoolSpecs": [pool(1, command=["python", "-c", "print('ok')"],
                                                             image="us-docker.pkg.dev/p/r/t:1")]}))
    before = len(recorded_requests())
    done = vtrain("submit", str(spec), "--endpoint", cloud["endpoint"], "--access-token-file", cloud["token_file"],
                  "--project", "my-project", *SCHEDULING_FLAGS)
    assert done.returncode == 0, done.stderr
    assert "runs as STANDARD" not in done.stderr  # that note is for this machine, not for Vertex AI
    ((_, body),) = created_jobs(before)
    # the client's REST transport sends enums as numbers; read the body as Vertex AI does
    sent = v1.CustomJob.from_json(json.dumps(body), ignore_unknown_fields=False).job_spec
    assert sent.scheduling.strategy == v1.Scheduling.Strategy.SPOT
    assert sent.scheduling.timeout.total_seconds() == 5400 and sent.scheduling.disable_retries
    assert (sent.service_account, sent.network, list(sent.reserved_ip_ranges)) == (
        "trainer@my-project.iam.gserviceaccount.com", "projects/123/global/networks/vpc", ["range-a", "range-b"])
    assert sent.enable_web_access and sent.enable_dashboard_access and sent.persistent_resource_id == "pool-1"
    assert sent.tensorboard == "projects/my-project/locations/us-central1/tensorboards/42"
    affinity = sent.worker_pool_specs[0].machine_spec.reservation_affinity
    assert affinity.reservation_affinity_type == v1.ReservationAffinity.Type.SPECIFIC_RESERVATION
    assert (affinity.key, list(affinity.values)) == ("compute.googleapis.com/reservation-name",
                                                     ["projects/my-project/zones/us-central1-a/reservations/r1"])


def test_submitting_to_a_region_without_the_accelerator_is_refused_before_sending(cloud: dict[str, Any],
                                                                                   tmp_path: Path) -> None:
    spec = tmp_path / "h100.yaml"
    spec.write_text(yaml.safe_dump({"workerPoolSpecs": [pool(1, machine="a3-highgpu-8g", accelerator="NVIDIA_H100_80GB",
                                                             accelerator_count=8, image="us-docker.pkg.dev/p/r/t:1")]}))
    before = len(recorded_requests())
    done = vtrain("submit", str(spec), "--endpoint", cloud["endpoint"], "--access-token-file", cloud["token_file"],
                  "--project", "my-project", "--region", "us-west2")
    assert done.returncode == 2 and len(recorded_requests()) == before
    assert done.stderr.splitlines() == [
        "vtrain: error: workerPoolSpecs[0].machineSpec.acceleratorType: NVIDIA H100 80GB (NVIDIA_H100_80GB) is not "
        "offered for Vertex AI training in us-west2 (offered there: NVIDIA P4, NVIDIA T4, NVIDIA B200; region data of "
        "2026-04-10, see the README)"]


def test_a_conditional_study_is_for_vertex_only_and_says_so(cloud: dict[str, Any]) -> None:
    from jupyter_ext import tuning
    from jupyter_ext.errors import ValidationError

    study = tuning.study_spec("optimizer=categorical:adam,sgd", "accuracy:maximize")
    study.parameters[0].conditional_parameter_specs = [{
        "parameter_spec": {"parameter_id": "momentum", "double_value_spec": {"min_value": 0.1, "max_value": 0.9}},
        "parent_categorical_values": {"values": ["sgd"]}}]
    resource = launch.tuning_request([pool(1, code="pass")], study, max_trials=2)
    with pytest.raises(ValidationError, match=r"conditionalParameterSpecs: Vertex AI runs conditional parameters, "
                                              "the local service cannot"):
        launch.submit_tuning(resource)
    from jupyter_ext import validate

    assert validate.tuning_problems(resource, local=False) == []  # Vertex AI takes it
