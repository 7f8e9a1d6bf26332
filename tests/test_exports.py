"""Exports of a job as text: REST body, gcloud config and command, SDK code, legacy trainingInput.

The data formats are JobSpec's own; these tests check what the exports add: the
command line as a shell splits it, the code as Python compiles it, and what each
says it cannot express."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import vtrain_in_process
from jupyter_ext import exports, scheduling
from jupyter_ext.errors import WorkbenchError
from jupyter_ext.spec import JobSpec

SPECS = Path(__file__).parent / "data" / "specs"
IMAGE = "us-docker.pkg.dev/proj/repo/trainer:1"

# four pools; args and env per pool, a disk and a scheduling that no gcloud flag can hold
FOUR_POOLS = f"""
displayName: four-pools
labels: {{team: vision}}
jobSpec:
  workerPoolSpecs:
  - machineSpec: {{machineType: n1-standard-8, acceleratorType: NVIDIA_TESLA_T4, acceleratorCount: 1}}
    replicaCount: 1
    containerSpec: {{imageUri: "{IMAGE}", args: [--epochs, "3"], env: [{{name: MODE, value: x}}]}}
  - machineSpec: {{machineType: n1-standard-16, acceleratorType: NVIDIA_TESLA_V100, acceleratorCount: 2}}
    replicaCount: 3
    containerSpec: {{imageUri: "{IMAGE}", args: [--epochs, "3"]}}
    diskSpec: {{bootDiskType: pd-standard, bootDiskSizeGb: 200}}
  - machineSpec: {{machineType: n1-highmem-8}}
    replicaCount: 2
    containerSpec: {{imageUri: "{IMAGE}", args: [--epochs, "3"]}}
  - machineSpec: {{machineType: n1-standard-4}}
    replicaCount: 1
    containerSpec: {{imageUri: gcr.io/p/evaluator:2}}
  baseOutputDirectory: {{outputUriPrefix: gs://bucket/out}}
  scheduling: {{timeout: 7200s}}
"""

# what a legacy trainingInput can hold of it: no per-pool env, no base output directory without --job-dir args
LEGACY_POOLS = FOUR_POOLS.replace(", env: [{name: MODE, value: x}]", "").replace(
    "  baseOutputDirectory: {outputUriPrefix: gs://bucket/out}\n", "")


@pytest.fixture
def job():
    return JobSpec.load(FOUR_POOLS)


def gcloud_argv(text):
    """The command as the shell would split it (comments dropped, line continuations joined)."""
    command = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    return shlex.split(command.replace("\\\n", " "))


def test_gcloud_command_has_one_worker_pool_spec_per_pool(job):
    text = exports.gcloud_command(job, "europe-west4")
    argv = gcloud_argv(text)
    assert argv[:4] == ["gcloud", "ai", "custom-jobs", "create"]
    assert "--region=europe-west4" in argv and "--display-name=four-pools" in argv
    specs = [a.split("=", 1)[1] for a in argv if a.startswith("--worker-pool-spec=")]
    assert len(specs) == len(job.spec.worker_pool_specs) == 4
    first = dict(kv.split("=", 1) for kv in specs[0].split(","))
    assert first == {"machine-type": "n1-standard-8", "replica-count": "1", "accelerator-type": "NVIDIA_TESLA_T4",
                     "accelerator-count": "1", "container-image-uri": IMAGE}
    assert dict(kv.split("=", 1) for kv in specs[2].split(",")) == {
        "machine-type": "n1-highmem-8", "replica-count": "2", "container-image-uri": IMAGE}
    assert "--labels=team=vision" in argv


def test_gcloud_command_names_what_flags_cannot_say(job):
    text = exports.gcloud_command(job, "europe-west4")
    comments = " ".join(line for line in text.splitlines() if line.startswith("#"))
    # the evaluator has no args, so --args cannot hold them for every pool
    assert not any(a.startswith("--args") for a in gcloud_argv(text))
    for lost in ("workerPoolSpecs[0].containerSpec.args", "workerPoolSpecs[0].containerSpec.env",
                 "workerPoolSpecs[1].diskSpec", "baseOutputDirectory", "scheduling"):
        assert lost in comments
    assert ("gcloud ai custom-jobs create --region=europe-west4 --display-name=four-pools --labels=team=vision "
            "--config=config.yaml") in text


def test_gcloud_command_of_a_simple_job_needs_no_config():
    body = json.loads((SPECS / "rest_custom_job.json").read_text())
    del body["jobSpec"]["baseOutputDirectory"]  # no gcloud flag for it
    text = exports.gcloud_command(JobSpec.load(body), "us-central1")
    assert not text.startswith("#"), text
    argv = gcloud_argv(text)
    assert sum(a.startswith("--worker-pool-spec=") for a in argv) == 2
    assert "--args=--epochs,3" in argv and "--labels=team=vision" in argv


def test_gcloud_command_quotes_for_the_shell():
    job = JobSpec.load({"displayName": "it's mine", "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
         "containerSpec": {"imageUri": IMAGE, "args": ["--msg", "two words"]}}]}})
    argv = gcloud_argv(exports.gcloud_command(job, "us-central1"))
    assert "--display-name=it's mine" in argv and "--args=--msg,two words" in argv


def test_a_container_pool_without_an_image_stays_a_container_pool(tmp_path, capsys):
    body = {"displayName": "noimg", "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "containerSpec": {}}]}}
    spec = "--worker-pool-spec=machine-type=n1-standard-4,replica-count=1,container-image-uri="
    assert gcloud_argv(exports.gcloud_command(JobSpec.load(body), "us-central1"))[-1] == spec
    # exported as it is, as the REST body is (vtrain validate names the missing image)
    path = tmp_path / "noimg.json"
    path.write_text(json.dumps(body))
    code, out, _ = vtrain_in_process(capsys, "convert", str(path), "--to", "rest")
    assert code == 0 and json.loads(out)["jobSpec"]["workerPoolSpecs"][0]["containerSpec"] == {}
    code, out, _ = vtrain_in_process(capsys, "convert", str(path), "--to", "gcloud-command")
    assert code == 0 and gcloud_argv(out)[-1] == spec


def test_sdk_code_is_python_that_sets_every_field(job):
    text = exports.sdk_code(job, "europe-west4")
    compile(text, "snippet.py", "exec")
    assert "location='europe-west4'" in text
    assert "job = aiplatform.CustomJob(" in text and "\njob.run(" in text
    assert "worker_pool_specs=[" in text and "base_output_dir='gs://bucket/out'" in text
    assert "labels={'team': 'vision'}" in text
    assert "job.run(timeout=7200)" in text
    assert "Not set by this snippet" not in text


KEY = "projects/p/locations/europe-west4/keyRings/ring/cryptoKeys/key"


@pytest.fixture
def encrypted(job):
    job.encryption_spec.kms_key_name = KEY
    return job


def test_gcloud_command_sets_the_encryption_key_as_a_flag(encrypted):
    """gcloud ai custom-jobs create takes the key as --kms-key and labels as --labels; a config file (a
    CustomJobSpec) cannot hold them, so the suggested --config command carries them too."""
    text = exports.gcloud_command(encrypted, "europe-west4")
    assert f"--kms-key={KEY}" in gcloud_argv(text) and "--labels=team=vision" in gcloud_argv(text)
    assert f"--display-name=four-pools --labels=team=vision --kms-key={KEY} --config=config.yaml" in text
    assert "encryptionSpec" not in text and KEY not in exports.gcloud_config(encrypted)


def test_sdk_code_passes_the_encryption_key_to_the_job(encrypted):
    text = exports.sdk_code(encrypted, "europe-west4")
    compile(text, "snippet.py", "exec")
    assert f"encryption_spec_key_name={KEY!r}" in text and "Not set by this snippet" not in text


def test_rest_body_and_legacy_carry_the_encryption_key(encrypted):
    assert json.loads(exports.rest_body(encrypted))["encryptionSpec"] == {"kmsKeyName": KEY}
    legacy = JobSpec.load(LEGACY_POOLS)
    legacy.encryption_spec.kms_key_name = KEY
    assert json.loads(exports.legacy_training_input(legacy))["trainingInput"]["encryptionConfig"] == {
        "kmsKeyName": KEY}


def test_gcloud_config_loads_back_to_the_same_job(job):
    text = exports.gcloud_config(job)
    assert text == job.dump("gcloud", as_yaml=True)
    assert "workerPoolSpecs" in yaml.safe_load(text)
    assert JobSpec.load(text).spec == job.spec


def test_rest_body_and_legacy_training_input(job):
    body = json.loads(exports.rest_body(job))
    assert body["displayName"] == "four-pools" and len(body["jobSpec"]["workerPoolSpecs"]) == 4
    with pytest.raises(WorkbenchError, match=r"workerPoolSpecs\[0\]\.containerSpec\.env"):
        exports.legacy_training_input(job)  # a trainingInput has no env: refused, not dropped
    legacy = json.loads(exports.legacy_training_input(JobSpec.load(LEGACY_POOLS)))
    assert legacy["trainingInput"]["masterType"] == "n1-standard-8"
    assert legacy["trainingInput"]["workerCount"] == "3"


@pytest.mark.parametrize("kind", list(exports.KINDS))
def test_export_by_name(job, kind):
    job = JobSpec.load(LEGACY_POOLS) if kind == "legacy" else job
    text = exports.export(job, kind, "asia-east1")
    assert text == exports.KINDS[kind].render(job, "asia-east1") and text.endswith("\n")


def test_kinds_and_their_labels():
    assert {kind: k.label for kind, k in exports.KINDS.items()} == {
        "rest": "REST body", "gcloud-config": "config.yaml", "gcloud-command": "gcloud command",
        "sdk-code": "Python SDK", "legacy": "trainingInput"}


def test_an_unknown_kind_names_the_valid_ones(job):
    with pytest.raises(WorkbenchError, match=r"unknown export 'yaml' \(valid: rest, gcloud-config, gcloud-command"):
        exports.export(job, "yaml", "us-central1")


def test_import_is_cheap():
    code = ("import sys, jupyter_ext.exports; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'ipywidgets', 'widgets')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---- scheduling and access fields in the exports ---------------------------------------------------------

SA = "trainer@p.iam.gserviceaccount.com"
NETWORK = "projects/123/global/networks/vpc"
TENSORBOARD = "projects/p/locations/us-central1/tensorboards/123"
RESERVATION = "projects/p/zones/us-central1-a/reservations/r1"


@pytest.fixture
def scheduled():
    a100 = "machineSpec: {machineType: a2-highgpu-1g, acceleratorType: NVIDIA_TESLA_A100, acceleratorCount: 1}"
    job = JobSpec.load(f"""
displayName: scheduled
jobSpec:
  workerPoolSpecs:
  - {{{a100}, replicaCount: 1, containerSpec: {{imageUri: "{IMAGE}"}}}}
  - {{{a100}, replicaCount: 2, containerSpec: {{imageUri: "{IMAGE}"}}}}
  baseOutputDirectory: {{outputUriPrefix: gs://bucket/out}}
""")
    return scheduling.apply(job, strategy="FLEX_START", max_wait="1h", timeout="1d", restart=True,
                            disable_retries=True, service_account=SA, network=NETWORK, reserved_ip_ranges="r-a,r-b",
                            web_access=True, dashboard_access=True, tensorboard=TENSORBOARD, reservation=RESERVATION,
                            persistent_resource="pool-1")


def test_gcloud_command_has_the_flags_gcloud_has_and_names_the_rest(scheduled):
    """gcloud ai custom-jobs create has --service-account, --network, --enable-web-access,
    --enable-dashboard-access and --persistent-resource-id (gcloud's custom_jobs/flags.py); no scheduling,
    TensorBoard, reserved ranges or reservation flag: those go through --config."""
    text = exports.gcloud_command(scheduled, "us-central1")
    argv = gcloud_argv(text)
    for flag in (f"--service-account={SA}", f"--network={NETWORK}", "--enable-web-access",
                 "--enable-dashboard-access", "--persistent-resource-id=pool-1"):
        assert flag in argv
    comments = " ".join(line for line in text.splitlines() if line.startswith("#"))
    for lost in ("scheduling", "tensorboard", "reservedIpRanges", "workerPoolSpecs[0].machineSpec.reservationAffinity",
                 "workerPoolSpecs[1].machineSpec.reservationAffinity"):
        assert lost in comments
    assert JobSpec.load(exports.gcloud_config(scheduled), display_name="scheduled").spec == scheduled.spec


def test_sdk_code_passes_the_run_arguments_and_sets_the_rest_on_the_job_spec(scheduled):
    text = exports.sdk_code(scheduled, "us-central1")
    compile(text, "snippet.py", "exec")
    run = next(line for line in text.splitlines() if line.startswith("job.run("))
    for arg in ("scheduling_strategy=Scheduling.Strategy.FLEX_START", "max_wait_duration=3600", "timeout=86400",
                "restart_job_on_worker_restart=True", "disable_retries=True", f"service_account={SA!r}",
                f"network={NETWORK!r}", "enable_web_access=True", f"tensorboard={TENSORBOARD!r}"):
        assert arg in run
    assert "persistent_resource_id='pool-1'," in text  # a CustomJob() argument
    assert "job.job_spec.enable_dashboard_access = True" in text
    assert "job.job_spec.reserved_ip_ranges = ['r-a', 'r-b']" in text
    assert "Not set by this snippet" not in text


def test_sdk_code_run_by_the_real_sdk_sends_the_same_job(scheduled, monkeypatch):
    """Run the snippet with google-cloud-aiplatform; the CustomJob it would create is the job's own."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from google.cloud.aiplatform import initializer, jobs

    sent = []

    class Created(Exception):
        pass

    class Client:
        def create_custom_job(self, parent, custom_job, timeout=None):
            sent.append(custom_job)
            raise Created

    def run(self, **kwargs):  # run() without waiting: submit() builds the request
        kwargs.pop("sync", None)
        self.api_client = Client()
        self.submit(**kwargs)

    monkeypatch.setattr(jobs.CustomJob, "run", run)
    aiplatform.init(credentials=AnonymousCredentials())
    try:
        with pytest.raises(Created):
            exec(exports.sdk_code(scheduled, "us-central1"), {})
    finally:
        initializer.global_config.__init__()
    assert JobSpec.load(sent[0]).custom_job() == scheduled.custom_job()


def test_legacy_export_of_a_job_with_fields_ai_platform_lacks_is_one_line(scheduled):
    with pytest.raises(WorkbenchError, match=r"^scheduling\.strategy: AI Platform's trainingInput has no equivalent"):
        exports.export(scheduled, "legacy", "us-central1")
