"""JobSpec: every accepted format loads (JSON and YAML), dumps, and loads back the same;
every field the user gave reaches the request; legacy AI Platform trainingInput maps onto
worker pools and the Vertex fields that mean the same; bad input is one SpecError line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from google.cloud.aiplatform_v1 import types as v1

from conftest import legacy_job, pool
from jupyter_ext import scheduling
from jupyter_ext.errors import SpecError, WorkbenchError
from jupyter_ext.names import FORMATS
from jupyter_ext.spec import JobSpec

SPECS = Path(__file__).parent / "data" / "specs"
# format -> sample files under tests/data/specs (each has a .json and a .yaml twin)
SAMPLES = {
    "rest": ["rest_custom_job"],
    "gcloud": ["gcloud_config"],
    "sdk": ["sdk_pools", "sdk_job"],
    "legacy": ["legacy_config"],
}
ALL_SAMPLES = [(fmt, stem) for fmt, stems in SAMPLES.items() for stem in stems]
TF_CPU = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"


def machine(p):
    ms = p.machine_spec
    return ms.machine_type, ms.accelerator_type.name if ms.accelerator_count else "", ms.accelerator_count


# ---- every format loads, from JSON and from YAML -------------------------------------------------------

def test_rest_body_loads_enum_numbers_and_int64_strings():
    job = JobSpec.load(SPECS / "rest_custom_job.json")
    assert job.display_name == "mnist-rest"
    assert job.labels == {"team": "vision"}
    assert [machine(p) for _, p in job.pools] == [("n1-standard-8", "NVIDIA_TESLA_T4", 1),
                                                  ("n1-standard-8", "NVIDIA_TESLA_T4", 2)]
    assert [p.replica_count for _, p in job.pools] == [1, 2]
    assert job.spec.base_output_directory.output_uri_prefix == "gs://bucket/mnist"
    assert list(job.spec.worker_pool_specs[1].container_spec.args) == ["--epochs", "3"]


def test_gcloud_config_loads_with_gap_pool():
    job = JobSpec.load(SPECS / "gcloud_config.yaml")
    assert job.display_name == "gcloud_config"  # a gcloud config has no name: the file's
    assert [pos for pos, _ in job.pools] == [0, 2]
    assert len(job.spec.worker_pool_specs) == 3
    assert machine(job.spec.worker_pool_specs[0]) == ("n1-highmem-8", "NVIDIA_TESLA_V100", 2)
    assert job.spec.worker_pool_specs[2].replica_count == 2
    assert job.spec.worker_pool_specs[2].container_spec.env[0].name == "ROLE"
    assert job.spec.scheduling.timeout.total_seconds() == 3600


@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_sdk_list_of_worker_pool_specs(suffix):
    job = JobSpec.load(SPECS / f"sdk_pools.{suffix}")
    assert job.display_name == "sdk_pools"
    assert [p.replica_count for _, p in job.pools] == [1, 3]
    pkg = job.spec.worker_pool_specs[1].python_package_spec
    assert (pkg.executor_image_uri, list(pkg.package_uris), pkg.python_module, list(pkg.args)) == (
        TF_CPU, ["gs://bucket/trainer-0.1.tar.gz"], "trainer.task", ["--lr", "0.01"])


@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_sdk_object_with_display_name_and_base_output_dir(suffix):
    job = JobSpec.load(SPECS / f"sdk_job.{suffix}")
    assert job.display_name == "multiworker-cassava-sdk"
    assert job.spec.base_output_directory.output_uri_prefix == "gs://bucket/cassava"
    assert [machine(p) for _, p in job.pools] == [("n1-standard-8", "NVIDIA_TESLA_V100", 1)] * 2
    assert job.spec.worker_pool_specs[0].container_spec.image_uri == "gcr.io/proj/multiworker:cassava"


@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_legacy_training_input_config(suffix):
    job = JobSpec.load(SPECS / f"legacy_config.{suffix}")
    pools = list(job.spec.worker_pool_specs)
    assert [machine(p) for p in pools] == [
        ("n1-highcpu-16", "", 0),  # complex_model_m
        ("n1-standard-4", "NVIDIA_TESLA_T4", 1),  # standard + acceleratorConfig
        ("n1-highmem-8", "", 0),  # large_model
        ("n1-highcpu-16", "", 0),  # evaluatorType defaults to masterType
    ]
    assert [p.replica_count for p in pools] == [1, 2, 1, 1]
    assert [p.container_spec.image_uri for p in pools] == [
        "gcr.io/proj/census:master", "gcr.io/proj/census:worker", "gcr.io/proj/census:master",
        "gcr.io/proj/census:master"]
    assert [list(p.container_spec.args) for p in pools] == [["--train-steps", "1000"]] * 4
    assert [list(p.container_spec.args) for p in job.custom_job_spec().worker_pool_specs] == [
        ["--train-steps", "1000", "--job-dir", "gs://bucket/census"]] * 4
    assert job.legacy.use_chief_in_tf_config is True
    assert job.legacy.job_dir == "gs://bucket/census"
    assert job.legacy.region == "us-central1"


@pytest.mark.parametrize("fmt,stem", ALL_SAMPLES)
def test_json_and_yaml_twins_give_the_same_job(fmt, stem):
    assert JobSpec.load(SPECS / f"{stem}.json") == JobSpec.load(SPECS / f"{stem}.yaml")


def test_load_accepts_text_dicts_and_messages():
    path = SPECS / "rest_custom_job.yaml"
    job = JobSpec.load(path)
    assert JobSpec.load(str(path)) == job
    assert JobSpec.load(path.read_text()) == job
    assert JobSpec.load(yaml.safe_load(path.read_text())) == job
    assert JobSpec.load(job.custom_job()) == job


# ---- enum names vs numbers, int64 as strings vs numbers ------------------------------------------------

@pytest.mark.parametrize("a,b", [
    (pool(machine="n1-standard-8", accelerator="NVIDIA_TESLA_T4", accelerator_count=2),
     pool(machine="n1-standard-8", accelerator=5, accelerator_count=2)),
    (pool(machine="n1-standard-8", accelerator="NVIDIA_TESLA_V100", accelerator_count=1),
     pool(machine="n1-standard-8", accelerator=3, accelerator_count="1")),
    (pool(replicas=1), pool(replicas="1")),
], ids=["enum-name-vs-number", "count-as-string", "int64-as-string"])
def test_equivalent_spellings_give_the_same_job(a, b):
    assert JobSpec.from_dict([a], "x") == JobSpec.from_dict([b], "x")
    assert JobSpec.from_dict({"workerPoolSpecs": [a]}, "x") == JobSpec.from_dict({"workerPoolSpecs": [b]}, "x")


def test_different_values_give_different_jobs():
    assert JobSpec.from_dict([pool(replicas=1), pool(replicas=2)], "x") != \
        JobSpec.from_dict([pool(replicas=1), pool(replicas=3)], "x")
    assert JobSpec.from_dict([pool(machine="n1-standard-8", accelerator=5, accelerator_count=1)], "x") != \
        JobSpec.from_dict([pool(machine="n1-standard-8", accelerator=3, accelerator_count=1)], "x")


# ---- round trips ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("as_yaml", [False, True], ids=["json", "yaml"])
@pytest.mark.parametrize("fmt,stem", ALL_SAMPLES)
def test_round_trip_in_own_format(fmt, stem, as_yaml):
    job = JobSpec.load(SPECS / f"{stem}.json")
    text = job.dump(fmt, as_yaml=as_yaml)
    if not as_yaml:
        json.loads(text)  # really JSON
    assert JobSpec.load(text, display_name=job.display_name) == job


@pytest.mark.parametrize("as_yaml", [False, True], ids=["json", "yaml"])
@pytest.mark.parametrize("fmt", ["rest", "gcloud", "sdk"])
@pytest.mark.parametrize("stem", ["rest_custom_job", "gcloud_config", "sdk_job", "sdk_pools"])
def test_vertex_formats_convert_into_each_other(stem, fmt, as_yaml):
    job = JobSpec.load(SPECS / f"{stem}.yaml")
    back = JobSpec.load(job.dump(fmt, as_yaml=as_yaml), display_name=job.display_name)
    assert (back.display_name, back.spec) == (job.display_name, job.spec)
    if fmt != "gcloud":  # a gcloud config has no labels (they are a command-line flag)
        assert back.labels == job.labels


def test_dump_formats_have_their_own_shape():
    job = JobSpec.load(SPECS / "sdk_job.yaml")
    rest = job.to_dict("rest")
    assert rest["displayName"] == "multiworker-cassava-sdk"
    assert rest["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] == "NVIDIA_TESLA_V100"
    gcloud = job.to_dict("gcloud")
    assert "displayName" not in gcloud and gcloud["workerPoolSpecs"][1]["replicaCount"] == 1
    assert gcloud["baseOutputDirectory"] == {"outputUriPrefix": "gs://bucket/cassava"}
    sdk = job.to_dict("sdk")
    assert sdk["display_name"] == "multiworker-cassava-sdk" and sdk["base_output_dir"] == "gs://bucket/cassava"
    assert sdk["worker_pool_specs"][0]["machine_spec"]["machine_type"] == "n1-standard-8"
    leg = no_base_output_directory(job).to_dict("legacy")
    assert leg["jobId"] == "multiworker_cassava_sdk"  # a valid AI Platform job ID
    assert leg["trainingInput"]["masterConfig"]["imageUri"] == "gcr.io/proj/multiworker:cassava"
    assert leg["trainingInput"]["workerCount"] in ("1", 1)
    with pytest.raises(SpecError, match=r"^--format: unknown format 'xml' \(valid: rest, gcloud, sdk, legacy\)$"):
        job.to_dict("xml")
    assert FORMATS == ("rest", "gcloud", "sdk", "legacy")


def no_base_output_directory(job: JobSpec) -> JobSpec:
    job = job.copy()
    job.spec._pb.ClearField("base_output_directory")
    return job


def test_legacy_job_dumped_for_vertex_carries_job_dir():
    job = JobSpec.load(SPECS / "legacy_config.yaml")
    vertex = JobSpec.load(job.dump("rest"))
    assert vertex.legacy is None
    assert vertex.spec == job.custom_job_spec()


# ---- every field the user gave reaches the request ------------------------------------------------------

KEY = "projects/p/locations/europe-west4/keyRings/ring/cryptoKeys/key"
SA = "trainer@p.iam.gserviceaccount.com"
NETWORK = "projects/123/global/networks/vpc"
FULL_BODY = {
    "displayName": "every-field",
    "labels": {"team": "vision"},
    "encryptionSpec": {"kmsKeyName": KEY},
    "jobSpec": {
        "workerPoolSpecs": [pool(), pool(replicas=2)],
        "serviceAccount": SA,
        "network": NETWORK,
        "scheduling": {"timeout": "7200s", "restartJobOnWorkerRestart": True, "strategy": "SPOT"},
    },
}


def full_job_message() -> v1.CustomJob:
    """FULL_BODY written by hand as the v1 message."""
    def one_pool(replicas):
        return v1.WorkerPoolSpec(machine_spec=v1.MachineSpec(machine_type="n1-standard-4"), replica_count=replicas,
                                 container_spec=v1.ContainerSpec(image_uri="gcr.io/p/trainer:1"))
    return v1.CustomJob(
        display_name="every-field", labels={"team": "vision"}, encryption_spec=v1.EncryptionSpec(kms_key_name=KEY),
        job_spec=v1.CustomJobSpec(
            worker_pool_specs=[one_pool(1), one_pool(2)], service_account=SA, network=NETWORK,
            scheduling=v1.Scheduling(timeout={"seconds": 7200}, restart_job_on_worker_restart=True,
                                     strategy=v1.Scheduling.Strategy.SPOT)))


def test_every_custom_job_field_reaches_the_request():
    job = JobSpec.load(FULL_BODY)
    assert job.encryption_spec.kms_key_name == KEY
    assert job.custom_job() == full_job_message()
    assert job.to_dict("rest") == FULL_BODY | {"jobSpec": {**FULL_BODY["jobSpec"], "workerPoolSpecs": [
        dict(p, replicaCount=str(p["replicaCount"])) for p in FULL_BODY["jobSpec"]["workerPoolSpecs"]]}}


@pytest.mark.parametrize("fmt", ["rest", "sdk"])
def test_every_custom_job_field_round_trips(fmt):
    job = JobSpec.load(FULL_BODY)
    assert JobSpec.load(job.dump(fmt)) == job
    assert JobSpec.load(job.dump(fmt, as_yaml=True)).custom_job() == full_job_message()


def test_sdk_form_takes_the_encryption_key_as_the_sdk_does():
    sdk = JobSpec.load(FULL_BODY).to_dict("sdk")
    assert sdk["encryption_spec_key_name"] == KEY  # as aiplatform.CustomJob(encryption_spec_key_name=...) takes it
    assert (sdk["service_account"], sdk["network"]) == (SA, NETWORK)
    assert JobSpec.load(sdk).custom_job() == full_job_message()


def test_gcloud_config_holds_the_spec_but_not_the_custom_job_fields():
    """A gcloud config is a CustomJobSpec: labels and the key are flags (see test_exports)."""
    job = JobSpec.load(FULL_BODY)
    config = job.to_dict("gcloud")
    assert "encryptionSpec" not in config and "labels" not in config
    back = JobSpec.load(job.dump("gcloud", as_yaml=True), display_name="every-field")
    assert back.spec == job.spec == full_job_message().job_spec


def test_a_custom_job_as_the_api_returns_it_loads_ignoring_output_only_fields():
    returned = dict(FULL_BODY, name="projects/123/locations/europe-west4/customJobs/456", state="JOB_STATE_FAILED",
                    createTime="2024-05-01T10:00:00Z", startTime="2024-05-01T10:01:00Z",
                    endTime="2024-05-01T10:09:00Z", updateTime="2024-05-01T10:09:00Z",
                    error={"code": 3, "message": "replica workerpool0-0 exited with a non-zero status"},
                    webAccessUris={"workerpool0-0": "https://example.notebooks.googleusercontent.com"},
                    satisfiesPzs=False, satisfiesPzi=False)
    job = JobSpec.load(returned)
    assert job == JobSpec.load(FULL_BODY)
    assert job.custom_job() == full_job_message()
    assert JobSpec.load(v1.CustomJob.from_json(json.dumps(returned))) == job  # the message the SDK returns, too


def test_a_job_without_a_key_sends_none():
    job = JobSpec.load({"displayName": "x", "jobSpec": {"workerPoolSpecs": [pool()]}})
    assert "encryption_spec" not in job.custom_job()
    assert "encryptionSpec" not in job.to_dict("rest") and "encryption_spec_key_name" not in job.to_dict("sdk")


# ---- legacy trainingInput fields with a Vertex equivalent ----------------------------------------------

LEGACY_HYPERPARAMETERS = {
    "goal": "MINIMIZE", "hyperparameterMetricTag": "val_loss", "maxTrials": 12, "maxParallelTrials": 3,
    "maxFailedTrials": 2, "algorithm": "RANDOM_SEARCH",
    "params": [
        {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.0001, "maxValue": 0.1, "scaleType": "UNIT_LOG_SCALE"},
        {"parameterName": "units", "type": "INTEGER", "minValue": 16, "maxValue": 128},
        {"parameterName": "optimizer", "type": "CATEGORICAL", "categoricalValues": ["adam", "sgd"]},
        {"parameterName": "batch", "type": "DISCRETE", "discreteValues": [32, 64, 128],
         "scaleType": "UNIT_LINEAR_SCALE"},
    ]}
LEGACY_FIELDS = {"workerType": "standard", "workerCount": 1, "region": "europe-west4", "serviceAccount": SA,
                 "network": NETWORK, "enableWebAccess": True, "scheduling": {"maxRunningTime": "7200s"},
                 "encryptionConfig": {"kmsKeyName": KEY}, "hyperparameters": LEGACY_HYPERPARAMETERS}


def test_legacy_fields_map_to_their_vertex_equivalents():
    job = legacy_job(**LEGACY_FIELDS)
    trainer = v1.ContainerSpec(image_uri="gcr.io/p/trainer:1")
    standard = v1.MachineSpec(machine_type="n1-standard-4")
    assert job.custom_job() == v1.CustomJob(
        display_name="census", encryption_spec=v1.EncryptionSpec(kms_key_name=KEY),
        job_spec=v1.CustomJobSpec(
            worker_pool_specs=[v1.WorkerPoolSpec(machine_spec=standard, replica_count=n, container_spec=trainer)
                               for n in (1, 1)],
            service_account=SA, network=NETWORK, enable_web_access=True,
            scheduling=v1.Scheduling(timeout={"seconds": 7200})))
    assert job.legacy.region == "europe-west4"  # where the job runs: the default region on submit
    param = v1.StudySpec.ParameterSpec
    assert job.tuning == v1.HyperparameterTuningJob(
        study_spec=v1.StudySpec(
            metrics=[v1.StudySpec.MetricSpec(metric_id="val_loss", goal="MINIMIZE")],
            parameters=[
                param(parameter_id="lr", double_value_spec={"min_value": 0.0001, "max_value": 0.1},
                      scale_type="UNIT_LOG_SCALE"),
                param(parameter_id="units", integer_value_spec={"min_value": 16, "max_value": 128}),
                param(parameter_id="optimizer", categorical_value_spec={"values": ["adam", "sgd"]}),
                param(parameter_id="batch", discrete_value_spec={"values": [32, 64, 128]},
                      scale_type="UNIT_LINEAR_SCALE")],
            algorithm="RANDOM_SEARCH"),
        max_trial_count=12, parallel_trial_count=3, max_failed_trial_count=2)


def test_legacy_tuning_job_runs_the_job_as_its_trials():
    job = legacy_job(**LEGACY_FIELDS)
    resource = job.tuning_job()
    custom = job.custom_job()
    assert (resource.display_name, resource.trial_job_spec, resource.encryption_spec) == (
        custom.display_name, custom.job_spec, custom.encryption_spec)
    assert (resource.study_spec, resource.max_trial_count) == (job.tuning.study_spec, 12)
    assert legacy_job().tuning is None and legacy_job().tuning_job() is None


def test_legacy_fields_round_trip():
    job = legacy_job(**LEGACY_FIELDS)
    ti = job.to_dict("legacy")["trainingInput"]
    for key, value in LEGACY_FIELDS.items():
        if key not in ("workerType", "workerCount"):
            assert ti[key] == value, key
    assert JobSpec.from_dict(job.to_dict("legacy")) == job
    assert JobSpec.load(job.dump("legacy", as_yaml=True)) == job


def test_legacy_hyperparameter_defaults_are_ai_platforms():
    job = legacy_job(hyperparameters={"params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.1,
                                                  "maxValue": 1}]})
    metric = job.tuning.study_spec.metrics[0]
    assert (metric.metric_id, metric.goal.name) == ("training/hptuning/metric", "MAXIMIZE")
    assert (job.tuning.max_trial_count, job.tuning.parallel_trial_count, job.tuning.max_failed_trial_count) == (1, 1, 0)
    assert job.tuning.study_spec.algorithm == v1.StudySpec.Algorithm.ALGORITHM_UNSPECIFIED


def test_a_vertex_job_dumps_its_fields_to_legacy():
    job = scheduling.apply(JobSpec.load(FULL_BODY), strategy="", restart=False)  # what legacy cannot hold
    ti = job.to_dict("legacy")["trainingInput"]
    assert (ti["serviceAccount"], ti["network"], ti["encryptionConfig"], ti["scheduling"]) == (
        SA, NETWORK, {"kmsKeyName": KEY}, {"maxRunningTime": "7200s"})


# ---- scheduling and access fields: every format holds them --------------------------------------------

TENSORBOARD = "projects/p/locations/us-central1/tensorboards/123"
RESERVATION = {"reservationAffinityType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name",
               "values": ["projects/p/zones/us-central1-a/reservations/r1"]}
A100_POOL = {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 1,
             "reservationAffinity": RESERVATION}
SCHEDULED = {
    "displayName": "scheduled",
    "jobSpec": {
        "workerPoolSpecs": [pool(machineSpec=A100_POOL), pool(replicas=2, machineSpec=A100_POOL)],
        "scheduling": {"timeout": "86400s", "restartJobOnWorkerRestart": True, "strategy": "FLEX_START",
                       "disableRetries": True, "maxWaitDuration": "3600s"},
        "serviceAccount": SA, "network": NETWORK, "reservedIpRanges": ["range-a", "range-b"],
        "enableWebAccess": True, "enableDashboardAccess": True, "tensorboard": TENSORBOARD,
        "persistentResourceId": "pool-1",
    },
}


def scheduled_message() -> v1.CustomJob:
    """SCHEDULED written by hand as the v1 message."""
    ms = v1.MachineSpec(machine_type="a2-highgpu-1g", accelerator_type=v1.AcceleratorType.NVIDIA_TESLA_A100,
                        accelerator_count=1, reservation_affinity=v1.ReservationAffinity(
                            reservation_affinity_type=v1.ReservationAffinity.Type.SPECIFIC_RESERVATION,
                            key="compute.googleapis.com/reservation-name",
                            values=["projects/p/zones/us-central1-a/reservations/r1"]))
    pools = [v1.WorkerPoolSpec(machine_spec=ms, replica_count=n,
                               container_spec=v1.ContainerSpec(image_uri="gcr.io/p/trainer:1")) for n in (1, 2)]
    return v1.CustomJob(display_name="scheduled", job_spec=v1.CustomJobSpec(
        worker_pool_specs=pools,
        scheduling=v1.Scheduling(timeout={"seconds": 86400}, restart_job_on_worker_restart=True,
                                 strategy=v1.Scheduling.Strategy.FLEX_START, disable_retries=True,
                                 max_wait_duration={"seconds": 3600}),
        service_account=SA, network=NETWORK, reserved_ip_ranges=["range-a", "range-b"], enable_web_access=True,
        enable_dashboard_access=True, tensorboard=TENSORBOARD, persistent_resource_id="pool-1"))


def test_scheduling_and_access_fields_reach_the_request():
    job = JobSpec.load(SCHEDULED)
    assert job.custom_job() == scheduled_message()
    assert job.to_dict("rest")["jobSpec"]["scheduling"] == SCHEDULED["jobSpec"]["scheduling"]


@pytest.mark.parametrize("as_yaml", [False, True], ids=["json", "yaml"])
@pytest.mark.parametrize("fmt", ["rest", "gcloud", "sdk"])
def test_scheduling_and_access_fields_survive_every_vertex_format(fmt, as_yaml):
    job = JobSpec.load(SCHEDULED)
    back = JobSpec.load(job.dump(fmt, as_yaml=as_yaml), display_name="scheduled")
    assert back == job
    assert back.custom_job() == scheduled_message()


# SCHEDULED as a user of google-cloud-aiplatform writes it: CustomJob(...) arguments and run() keywords
SDK_RUN = {"timeout": 86400, "restart_job_on_worker_restart": True, "scheduling_strategy": "FLEX_START",
           "disable_retries": True, "max_wait_duration": 3600, "service_account": SA, "network": NETWORK,
           "enable_web_access": True, "tensorboard": TENSORBOARD}
SDK_SCHEDULED = {"display_name": "scheduled",
                 "worker_pool_specs": JobSpec.load(SCHEDULED).to_dict("sdk")["worker_pool_specs"],
                 "persistent_resource_id": "pool-1", "reserved_ip_ranges": ["range-a", "range-b"],
                 "enable_dashboard_access": True, **SDK_RUN}


def test_the_sdk_form_holds_them_under_the_sdks_names():
    sdk = JobSpec.load(SCHEDULED).to_dict("sdk")
    assert sdk == SDK_SCHEDULED  # run()'s keywords, durations in whole seconds, the strategy by name
    assert "scheduling" not in sdk
    assert sdk["worker_pool_specs"][0]["machine_spec"]["reservation_affinity"]["values"] == RESERVATION["values"]


@pytest.mark.parametrize("as_yaml", [False, True], ids=["json", "yaml"])
def test_the_sdk_forms_run_keywords_load_and_round_trip(as_yaml):
    job = JobSpec.load(SDK_SCHEDULED)
    assert job.custom_job() == scheduled_message()
    text = job.dump("sdk", as_yaml=as_yaml)
    assert (yaml.safe_load if as_yaml else json.loads)(text) == SDK_SCHEDULED
    assert JobSpec.load(text) == job == JobSpec.load(SCHEDULED)


def test_the_sdk_form_means_what_the_real_sdk_sends(monkeypatch):
    """CustomJob(**its arguments).run(**its keywords) with google-cloud-aiplatform creates the job the form loads."""
    import inspect

    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from google.cloud.aiplatform import initializer

    sent = []

    class Created(Exception):
        pass

    class Client:  # records the request run() sends, and stops there
        def create_custom_job(self, parent, custom_job, timeout=None):
            sent.append(custom_job)
            raise Created

    form = dict(SDK_SCHEDULED, scheduling_strategy=v1.Scheduling.Strategy.FLEX_START)
    run_keywords = set(inspect.signature(aiplatform.CustomJob.run).parameters) - {"self"}
    run = {k: form.pop(k) for k in list(form) if k in run_keywords}
    spec_only = {k: form.pop(k) for k in ("reserved_ip_ranges", "enable_dashboard_access")}  # run() lacks them
    aiplatform.init(project="p", location="us-central1", credentials=AnonymousCredentials(),
                    staging_bucket="gs://b")
    try:
        custom = aiplatform.CustomJob(**form)
        for key, value in spec_only.items():
            setattr(custom.job_spec, key, value)
        custom.api_client = Client()
        with pytest.raises(Created):
            custom.submit(**run)
    finally:
        initializer.global_config.__init__()
    sent[0].job_spec.base_output_directory = None  # the SDK's own default (a staging folder) is not the form's
    assert JobSpec.load(sent[0]).custom_job() == JobSpec.load(SDK_SCHEDULED).custom_job()


@pytest.mark.parametrize("keywords,scheduling", [
    ({"timeout": 0}, {}),  # run(): a timeout of 0 or None is the default, 7 days
    ({"timeout": None, "disable_retries": False}, {}),
    ({"max_wait_duration": 0, "scheduling_strategy": "FLEX_START"},
     {"maxWaitDuration": "0s", "strategy": "FLEX_START"}),
    ({"scheduling_strategy": 4}, {"strategy": "SPOT"}),  # a Scheduling.Strategy is an int
    ({"timeout": 1800, "scheduling": {"strategy": "SPOT"}}, {"timeout": "1800s", "strategy": "SPOT"}),
])
def test_run_keywords_have_the_sdks_meaning(keywords, scheduling):
    job = JobSpec.load({"worker_pool_specs": [pool(form="sdk")], **keywords})
    assert job.to_dict("rest")["jobSpec"].get("scheduling", {}) == scheduling


def test_what_run_cannot_say_stays_under_scheduling_in_the_sdk_form():
    job = JobSpec.load({"displayName": "x", "jobSpec": {"workerPoolSpecs": [pool()],
                                                         "scheduling": {"timeout": "1.5s", "strategy": "SPOT"}}})
    sdk = job.to_dict("sdk")
    assert (sdk["scheduling"], sdk["scheduling_strategy"]) == ({"timeout": "1.500s"}, "SPOT")
    assert "timeout" not in sdk and JobSpec.load(sdk) == job


@pytest.mark.parametrize("keywords,error", [
    ({"timeout": "1h"}, "timeout: must be a whole number of seconds (as CustomJob.run() takes it), not text"),
    ({"timeout": 90.5}, "timeout: must be a whole number of seconds (as CustomJob.run() takes it), not 90.5"),
    ({"max_wait_duration": -1}, "max_wait_duration: must not be negative (-1)"),
    ({"scheduling_strategy": "CHEAP"},
     "scheduling_strategy: invalid value 'CHEAP' (valid: ON_DEMAND, LOW_COST, STANDARD, SPOT, FLEX_START)"),
    ({"scheduling_strategy": 5},
     "scheduling_strategy: invalid value 5 (valid: ON_DEMAND, LOW_COST, STANDARD, SPOT, FLEX_START)"),
    ({"disable_retries": "yes"}, "disable_retries: must be true or false, not text"),
    ({"timeout": 60, "scheduling": {"timeout": "60s"}},
     "timeout: given twice, as timeout and as scheduling.timeout; keep one"),
    ({"scheduling_strategy": "SPOT", "scheduling": {"strategy": "SPOT"}},
     "scheduling_strategy: given twice, as scheduling_strategy and as scheduling.strategy; keep one"),
    ({"sync": False}, "unknown field 'sync'"),  # how run() waits, not a field of the job
])
def test_a_wrong_run_keyword_is_one_line_naming_it(keywords, error):
    with pytest.raises(SpecError) as err:
        JobSpec.load({"worker_pool_specs": [pool(form="sdk")], **keywords})
    assert str(err.value) == error


@pytest.mark.parametrize("path,change", [
    ("scheduling.strategy", {"scheduling": {"strategy": "SPOT"}}),
    ("scheduling.maxWaitDuration", {"scheduling": {"maxWaitDuration": "0s"}}),
    ("scheduling.restartJobOnWorkerRestart", {"scheduling": {"restartJobOnWorkerRestart": True}}),
    ("scheduling.disableRetries", {"scheduling": {"disableRetries": True}}),
    ("reservedIpRanges", {"reservedIpRanges": ["range-a"]}),
    ("enableDashboardAccess", {"enableDashboardAccess": True}),
    ("tensorboard", {"tensorboard": TENSORBOARD}),
    ("persistentResourceId", {"persistentResourceId": "pool-1"}),
    ("workerPoolSpecs[1].machineSpec.reservationAffinity",
     {"workerPoolSpecs": [pool(), pool(machineSpec={"machineType": "n1-standard-4",
                                                    "reservationAffinity": RESERVATION})]}),
    ("workerPoolSpecs[0].machineSpec.gpuPartitionSize",
     {"workerPoolSpecs": [pool(machineSpec={"machineType": "a2-highgpu-1g", "gpuPartitionSize": "1g.5gb"})]}),
])
def test_what_a_training_input_cannot_hold_is_one_line_when_dumped_to_legacy(path, change):
    job = JobSpec.load({"displayName": "x", "jobSpec": {"workerPoolSpecs": [pool()], **change}})
    with pytest.raises(SpecError) as err:
        job.to_dict("legacy")
    assert str(err.value) == (f"{path}: AI Platform's trainingInput has no equivalent; write the job as rest, "
                              "gcloud or sdk instead")


def test_what_a_training_input_holds_round_trips_through_legacy():
    job = scheduling.apply(JobSpec.load(FULL_BODY), strategy="", restart=False, web_access=True)
    back = JobSpec.load(job.dump("legacy"))
    assert back.custom_job_spec() == job.custom_job_spec()


@pytest.mark.parametrize("fields,error", [
    ({"scheduling": {"maxWaitTime": "3600s"}}, "trainingInput.scheduling.maxWaitTime: "),
    ({"scheduling": {"priority": 5}}, "trainingInput.scheduling.priority: "),
    ({"scheduling": {"maxRunningTime": "2h"}}, "trainingInput.scheduling.maxRunningTime: "),
    ({"masterConfig": {"imageUri": "gcr.io/p/i", "tpuTfVersion": "2.11"}}, "trainingInput.masterConfig.tpuTfVersion: "),
    ({"masterConfig": {"imageUri": "gcr.io/p/i", "image": "x"}}, "trainingInput.masterConfig: unknown field 'image'"),
    ({"workerCount": 1, "workerConfig": {"diskConfig": {"bootDiskSizeGb": 100, "localSsds": 1}}},
     "trainingInput.workerConfig.diskConfig: unknown field 'localSsds'"),
    ({"encryptionConfig": {"key": KEY}}, "trainingInput.encryptionConfig: unknown field 'key'"),
    ({"maxRunningTime": "7200s"}, "trainingInput: unknown field 'maxRunningTime'"),
    ({"hyperparameters": dict(LEGACY_HYPERPARAMETERS, resumePreviousJobId="old_job")},
     "trainingInput.hyperparameters.resumePreviousJobId: "),
    ({"hyperparameters": dict(LEGACY_HYPERPARAMETERS, enableTrialEarlyStopping=True)},
     "trainingInput.hyperparameters.enableTrialEarlyStopping: "),
    ({"hyperparameters": dict(LEGACY_HYPERPARAMETERS, maxTrails=3)},
     "trainingInput.hyperparameters: unknown field 'maxTrails'"),
    ({"hyperparameters": dict(LEGACY_HYPERPARAMETERS, goal="BIGGER")}, "trainingInput.hyperparameters.goal: "),
    ({"hyperparameters": dict(LEGACY_HYPERPARAMETERS, params=[])}, "trainingInput.hyperparameters.params: "),
    ({"hyperparameters": {"params": [{"parameterName": "x", "type": "FLOAT", "minValue": 0, "maxValue": 1}]}},
     "trainingInput.hyperparameters.params[0].type: invalid value 'FLOAT' (valid: DOUBLE, INTEGER, CATEGORICAL"),
    ({"hyperparameters": {"params": [{"parameterName": "x", "type": "INTEGER", "minValue": 0.5, "maxValue": 4}]}},
     "trainingInput.hyperparameters.params[0].minValue: not a whole number: 0.5"),
    ({"hyperparameters": {"params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1,
                                      "categoricalValues": ["a"]}]}},
     "trainingInput.hyperparameters.params[0].categoricalValues: not used by a DOUBLE parameter"),
    ({"hyperparameters": {"params": [{"type": "CATEGORICAL", "categoricalValues": ["a"]}]}},
     "trainingInput.hyperparameters.params[0].parameterName: required"),
])
def test_legacy_fields_without_a_vertex_equivalent_are_one_line_naming_the_field(fields, error):
    with pytest.raises(SpecError) as err:
        legacy_job(**fields)
    text = str(err.value)
    assert text.startswith(error), text
    assert "\n" not in text


def test_early_stopping_off_is_the_default_and_accepted():
    job = legacy_job(hyperparameters=dict(LEGACY_HYPERPARAMETERS, enableTrialEarlyStopping=False))
    assert job.tuning == legacy_job(hyperparameters=LEGACY_HYPERPARAMETERS).tuning


def test_a_study_ai_platform_cannot_hold_is_one_line_when_dumped_to_legacy():
    job = legacy_job(hyperparameters=LEGACY_HYPERPARAMETERS)
    job.tuning.study_spec.metrics.append(v1.StudySpec.MetricSpec(metric_id="accuracy", goal="MAXIMIZE"))
    with pytest.raises(SpecError, match=r"^studySpec\.metrics: AI Platform's hyperparameters cannot hold it"):
        job.to_dict("legacy")


def test_a_bare_training_input_may_carry_its_job_id():
    job = JobSpec.from_dict({"jobId": "census_2", "scaleTier": "BASIC", "masterConfig": {"imageUri": "gcr.io/p/i"}})
    assert job.legacy.job_id == "census_2"


# ---- legacy AI Platform mapping ------------------------------------------------------------------------

ROLE_TYPES = {"workerType": "standard", "parameterServerType": "standard", "evaluatorType": "standard"}


def test_legacy_roles_map_to_pools_in_order():
    job = legacy_job(workerCount=3, parameterServerCount="2", evaluatorCount=1, **ROLE_TYPES)
    assert [(pos, p.replica_count) for pos, p in job.pools] == [(0, 1), (1, 3), (2, 2), (3, 1)]


def test_legacy_missing_middle_role_leaves_an_empty_pool():
    job = legacy_job(parameterServerCount=1, **ROLE_TYPES)
    assert [pos for pos, _ in job.pools] == [0, 2]
    assert len(job.spec.worker_pool_specs) == 3


def test_legacy_images_default_to_the_masters():
    job = legacy_job(image="gcr.io/p/master:1", masterType="complex_model_m", workerCount=2, parameterServerCount=1,
                     workerType="complex_model_m", parameterServerType="large_model",
                     parameterServerConfig={"imageUri": "gcr.io/p/ps:1"})
    pools = list(job.spec.worker_pool_specs)
    assert [p.container_spec.image_uri for p in pools] == ["gcr.io/p/master:1", "gcr.io/p/master:1", "gcr.io/p/ps:1"]
    assert [p.machine_spec.machine_type for p in pools] == ["n1-highcpu-16", "n1-highcpu-16", "n1-highmem-8"]


@pytest.mark.parametrize("legacy_name,machine_type", [
    ("standard", "n1-standard-4"), ("complex_model_m", "n1-highcpu-16"), ("large_model", "n1-highmem-8"),
    ("n1-standard-16", "n1-standard-16"),
])
def test_legacy_machine_names(legacy_name, machine_type):
    assert legacy_job(masterType=legacy_name).spec.worker_pool_specs[0].machine_spec.machine_type == machine_type


def test_scale_tier_basic_is_one_standard_primary():
    job = JobSpec.from_dict({"trainingInput": {"scaleTier": "BASIC", "masterConfig": {"imageUri": "gcr.io/p/i"},
                                               "workerCount": 4}})
    assert [(pos, p.replica_count, p.machine_spec.machine_type) for pos, p in job.pools] == [(0, 1, "n1-standard-4")]
    assert job.replica_count == 1


@pytest.mark.parametrize("tier", ["STANDARD_1", "PREMIUM_1", "BASIC_GPU"])
def test_unpublished_scale_tiers_are_errors(tier):
    with pytest.raises(SpecError) as err:
        JobSpec.from_dict({"trainingInput": {"scaleTier": tier, "masterConfig": {"imageUri": "gcr.io/p/i"}}})
    assert str(err.value).startswith("trainingInput.scaleTier: ")
    assert tier in str(err.value)
    assert "\n" not in str(err.value)


def test_custom_tier_needs_master_type():
    with pytest.raises(SpecError, match=r"^trainingInput\.masterType: "):
        JobSpec.from_dict({"trainingInput": {"scaleTier": "CUSTOM", "masterConfig": {"imageUri": "gcr.io/p/i"}}})


def test_job_dir_becomes_flag_and_output_directory():
    job = legacy_job(workerCount=1, parameterServerCount=1, args=["--steps", "5"], jobDir="gs://b/jd", **ROLE_TYPES)
    spec = job.custom_job_spec()
    assert [list(p.container_spec.args) for _, p in job.pools] == [["--steps", "5"]] * 3
    assert [list(p.container_spec.args) for p in spec.worker_pool_specs] == [
        ["--steps", "5", "--job-dir", "gs://b/jd"]] * 3
    assert spec.base_output_directory.output_uri_prefix == "gs://b/jd"
    assert not job.spec.base_output_directory.output_uri_prefix
    assert job.custom_job().job_spec == spec


def test_python_module_and_packages_give_python_package_pools():
    job = JobSpec.from_dict({"trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "standard", "workerType": "standard", "workerCount": 2,
        "runtimeVersion": "2.11",
        "pythonModule": "trainer.task", "packageUris": ["gs://b/trainer-0.1.tar.gz"], "args": ["--lr", "0.1"]}})
    assert [pos for pos, _ in job.pools] == [0, 1]
    for _, p in job.pools:
        assert "container_spec" not in p
        pkg = p.python_package_spec
        assert pkg.python_module == "trainer.task"
        assert list(pkg.package_uris) == ["gs://b/trainer-0.1.tar.gz"]
        assert list(pkg.args) == ["--lr", "0.1"]
        assert pkg.executor_image_uri.startswith("us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11")


def test_legacy_without_image_or_module_is_an_error():
    with pytest.raises(SpecError, match=r"^trainingInput\.masterConfig\.imageUri: "):
        JobSpec.from_dict({"trainingInput": {"masterType": "standard"}})


# ---- errors: one SpecError line naming the field --------------------------------------------------------

def spec_error(source, **kwargs) -> str:
    with pytest.raises(SpecError) as err:
        JobSpec.load(source, **kwargs)
    assert isinstance(err.value, WorkbenchError)
    text = str(err.value)
    assert text and "\n" not in text and "Traceback" not in text
    return text


def test_unknown_field_names_where():
    assert spec_error({"workerPoolSpecs": [dict(pool(), replicas=2)]}) == \
        "workerPoolSpecs[0]: unknown field 'replicas'"
    body = {"displayName": "a", "jobSpec": {"workerPoolSpecs": [pool()]}}
    body["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["gpus"] = 1
    assert spec_error(body) == "jobSpec.workerPoolSpecs[0].machineSpec: unknown field 'gpus'"


@pytest.mark.parametrize("source,path", [
    ({"workerPoolSpecs": [pool(machine="n1-standard-8", accelerator="NVIDIA_T4", accelerator_count=1)]},
     "workerPoolSpecs[0].machineSpec.acceleratorType"),
    ({"displayName": "a", "jobSpec": {"workerPoolSpecs": [
        pool(), pool(machine="n1-standard-8", accelerator="T4", accelerator_count=1)]}},
     "jobSpec.workerPoolSpecs[1].machineSpec.acceleratorType"),
])
def test_bad_enum_name_names_path_and_lists_valid_names(source, path):
    text = spec_error(source)
    assert text.startswith(f"{path}: ")
    assert "NVIDIA_TESLA_T4" in text and "NVIDIA_TESLA_V100" in text and "TPU_V3" in text
    assert "ACCELERATOR_TYPE_UNSPECIFIED" not in text


def test_legacy_bad_accelerator_names_the_legacy_field():
    text = spec_error({"trainingInput": {
        "masterType": "standard", "masterConfig": {"imageUri": "gcr.io/p/i"}, "workerType": "standard",
        "workerCount": 1, "workerConfig": {"acceleratorConfig": {"type": "T4", "count": 1}}}})
    # the user wrote trainingInput.workerConfig.acceleratorConfig.type, not a workerPoolSpecs path
    assert text.startswith("trainingInput.workerConfig.acceleratorConfig.type: "), text


@pytest.mark.parametrize("count", ["two", "1.5x", 1.5])
def test_non_integer_replica_count_names_pool(count):
    text = spec_error({"workerPoolSpecs": [pool(), pool(replicas=count)]})
    assert text.startswith("workerPoolSpecs[1].replicaCount: ")


def test_legacy_non_integer_count():
    with pytest.raises(SpecError, match=r"^trainingInput\.workerCount: not a whole number: 'two'$"):
        legacy_job(workerCount="two", workerType="standard")


def test_yaml_syntax_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("workerPoolSpecs:\n  - machineSpec: {machineType: n1-standard-4\n")
    text = spec_error(bad)
    assert str(bad) in text and "line" in text


@pytest.mark.parametrize("source", [{"displayName": "x", "foo": 1}, "just a: mapping\n", 42])
def test_mapping_that_is_no_job(source):
    text = spec_error(source)
    assert "job" in text


def test_missing_file(tmp_path):
    assert spec_error(tmp_path / "nope.yaml") == f"no such job file: {tmp_path / 'nope.yaml'}"
    assert spec_error("nope.json") == "no such job file: nope.json"


# ---- the scheduling and access flags (jupyter_ext.scheduling) -----------------------------------------

def test_flags_set_the_fields_the_formats_hold():
    plain = JobSpec.load({"displayName": "scheduled", "jobSpec": {"workerPoolSpecs": [
        pool(machineSpec={k: v for k, v in A100_POOL.items() if k != "reservationAffinity"}),
        pool(replicas=2, machineSpec={k: v for k, v in A100_POOL.items() if k != "reservationAffinity"})]}})
    job = scheduling.apply(plain, strategy="flex_start", max_wait="1h", timeout="1d", restart=True,
                           disable_retries=True, service_account=SA, network=NETWORK,
                           reserved_ip_ranges="range-a, range-b", web_access=True, dashboard_access=True,
                           tensorboard=TENSORBOARD, reservation=RESERVATION["values"][0], persistent_resource="pool-1")
    assert job.custom_job() == scheduled_message()
    assert plain.custom_job() != job.custom_job()  # apply() changes a copy
    assert scheduling.apply(plain, **scheduling.values(job)) == job


def test_flag_values_clear_what_they_set():
    job = JobSpec.load(SCHEDULED)
    cleared = scheduling.apply(job, **{key: "" if isinstance(value, str) else False
                                       for key, value in scheduling.values(job).items()})
    assert "scheduling" not in cleared.to_dict("rest")["jobSpec"]  # no empty `scheduling: {}` is sent
    assert "reservationAffinity" not in json.dumps(cleared.to_dict("rest"))
    assert scheduling.values(cleared) == {key: "" if isinstance(value, str) else False
                                          for key, value in scheduling.values(job).items()}


@pytest.mark.parametrize("text,seconds", [("30m", 1800), ("2h", 7200), ("3600s", 3600), ("1h30m", 5400),
                                          ("2d", 172800), ("45", 45), ("0", 0), ("1.5s", 1.5)])
def test_durations_read_like_gclouds(text, seconds):
    assert scheduling.parse_duration(text).total_seconds() == seconds
    assert scheduling.parse_duration(scheduling.format_duration(scheduling.parse_duration(text))) == \
        scheduling.parse_duration(text)


@pytest.mark.parametrize("values,error", [
    ({"max_wait": "2 hours"}, "--max-wait (scheduling.maxWaitDuration): not a duration: '2 hours' (e.g. 30m, 2h"),
    ({"timeout": "-5m"}, "--timeout (scheduling.timeout): not a duration: '-5m'"),
    ({"strategy": "cheap"}, "--strategy (scheduling.strategy): 'cheap' is not a strategy (valid: STANDARD, SPOT, "
                            "FLEX_START)"),
    ({"reservation": "r1"}, "--reservation (machineSpec.reservationAffinity): 'r1': give ANY, NONE, or a "
                            "reservation's full name"),
])
def test_a_bad_flag_value_is_one_line_naming_the_flag(values, error):
    with pytest.raises(SpecError) as err:
        scheduling.apply(JobSpec.load(FULL_BODY), **values)
    assert str(err.value).startswith(error) and "\n" not in str(err.value)


def test_a_legacy_job_takes_only_the_flags_its_training_input_holds():
    job = legacy_job()
    held = scheduling.apply(job, timeout="2h", service_account=SA, network=NETWORK, web_access=True, strategy="")
    assert held.to_dict("legacy")["trainingInput"]["scheduling"] == {"maxRunningTime": "7200s"}
    with pytest.raises(SpecError, match=r"^--strategy \(scheduling.strategy\): an AI Platform \(legacy\) job "
                                        r"cannot hold it; convert the job first \(vtrain convert --to rest\)$"):
        scheduling.apply(job, strategy="SPOT")


def test_flags_parse_with_argparse_as_the_cli_and_the_magic_give_them():
    import argparse

    parser = argparse.ArgumentParser()
    scheduling.add_arguments(parser)
    args = parser.parse_args(["--strategy", "SPOT", "--timeout", "90m", "--enable-web-access", "--reservation", "ANY",
                              "--no-restart-job-on-worker-restart"])
    job = scheduling.from_args(JobSpec.load(FULL_BODY), args)
    assert (job.spec.scheduling.strategy.name, job.spec.scheduling.timeout.total_seconds()) == ("SPOT", 5400)
    assert not job.spec.scheduling.restart_job_on_worker_restart and job.spec.enable_web_access
    assert {p.machine_spec.reservation_affinity.reservation_affinity_type.name for _, p in job.pools} == {
        "ANY_RESERVATION"}
    assert job.spec.service_account == SA  # a flag not given leaves its field alone
    assert [flag for flag, _, _ in scheduling.FLAGS.values()] == [
        "--strategy", "--max-wait", "--timeout", "--restart-job-on-worker-restart", "--disable-retries",
        "--service-account", "--network", "--reserved-ip-ranges", "--enable-web-access", "--enable-dashboard-access",
        "--tensorboard", "--reservation", "--persistent-resource-id"]


def test_the_reservation_flag_leaves_a_reduction_server_pool_alone():
    from jupyter_ext import catalog

    reducers = pool(replicas=4, machine="n1-highcpu-16", image=catalog.reduction_server_image("us-central1"))
    job = JobSpec.load({"displayName": "rs", "jobSpec": {"workerPoolSpecs": [pool(), pool(), reducers]}})
    job = scheduling.apply(job, reservation="ANY")
    assert ["reservation_affinity" in p.machine_spec for _, p in job.pools] == [True, True, False]
    assert scheduling.values(job)["reservation"] == "ANY"


def test_a_reduction_server_pool_is_the_third_pool_running_the_reducer_image():
    from jupyter_ext import catalog
    from jupyter_ext.spec import is_reduction_server_pool

    image = catalog.reduction_server_image("europe-west4")
    job = JobSpec.load({"workerPoolSpecs": [pool(), pool(image=image), pool(replicas=2, image=image),
                                            pool(image=image)]})
    assert [is_reduction_server_pool(pos, p) for pos, p in job.pools] == [False, False, True, False]
    assert [pos for pos, _ in job.training_pools()] == [0, 1, 3]
    assert not is_reduction_server_pool(2, JobSpec.load({"workerPoolSpecs": [pool(), pool(), pool()]}).pools[2][1])


def test_the_strategy_flag_takes_the_current_strategies_but_gives_a_job_back_its_deprecated_one():
    old = JobSpec.load({"displayName": "old", "jobSpec": {"workerPoolSpecs": [pool()],
                                                          "scheduling": {"strategy": "ON_DEMAND"}}})
    assert scheduling.apply(old, **scheduling.values(old)) == old  # as the configurator gives it back
    with pytest.raises(SpecError, match=r"^--strategy \(scheduling.strategy\): 'LOW_COST' is not a strategy \(valid: "
                                        r"STANDARD, SPOT, FLEX_START\)$"):
        scheduling.apply(old, strategy="LOW_COST")
    plain = scheduling.apply(old, strategy="")
    with pytest.raises(SpecError, match="'ON_DEMAND' is not a strategy"):
        scheduling.apply(plain, strategy="ON_DEMAND")
