"""`vtrain` as a user runs it: what it prints, and that it starts without loading what it does not need."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT, vtrain
from jupyter_ext import exports
from jupyter_ext.spec import JobSpec

EXAMPLE = ROOT / "jupyter_ext" / "examples" / "multiworker.yaml"
CLIENT_LIBRARY = "google.cloud.aiplatform_v1"


def _modules_loaded(code: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running `code`."""
    done = subprocess.run([sys.executable, "-c", f"{code}\nimport sys; print('\\n'.join(sys.modules))"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_help_and_argument_errors_do_not_load_the_client_library() -> None:
    cli = "import sys; from jupyter_ext import cli\ntry:\n    cli.main({argv})\nexcept SystemExit:\n    pass"
    for argv in (["--help"], ["submit", "job.yaml", "--bogus"], ["convert", "job.yaml", "--to", "nothing"]):
        loaded = _modules_loaded(cli.format(argv=argv))
        assert not any(m.startswith(CLIENT_LIBRARY) for m in loaded), argv
    done = vtrain("submit", "job.yaml", "--bogus")
    assert done.returncode == 2 and "unrecognized arguments: --bogus" in done.stderr
    assert "Traceback" not in done.stderr


def test_load_ext_does_not_load_the_client_library() -> None:
    loaded = _modules_loaded("from IPython.testing.globalipapp import start_ipython\n"
                             "start_ipython().run_line_magic('load_ext', 'jupyter_ext')")
    assert "jupyter_ext.magics" in loaded
    assert not any(m.startswith(CLIENT_LIBRARY) for m in loaded)


def test_convert_prints_the_equivalent_gcloud_command() -> None:
    done = vtrain("convert", str(EXAMPLE), "--to", "gcloud-command", "--region", "europe-west4")
    assert done.returncode == 0, done.stderr
    assert done.stdout == exports.gcloud_command(JobSpec.load(EXAMPLE), "europe-west4")
    # the pools' env (TF_USE_LEGACY_KERAS) has no gcloud flag: the command says so, and how to send it instead
    assert done.stdout.startswith("# Not expressible as flags: workerPoolSpecs[0].pythonPackageSpec.env")
    assert "\ngcloud ai custom-jobs create" in done.stdout and "--region=europe-west4" in done.stdout
    assert "--worker-pool-spec=machine-type=n1-standard-4,replica-count=1" in done.stdout


def test_convert_takes_the_region_from_the_environment() -> None:
    done = vtrain("convert", str(EXAMPLE), "--to", "gcloud-command", env={"CLOUD_ML_REGION": "asia-east1"})
    assert done.returncode == 0 and "--region=asia-east1" in done.stdout


def test_inspect_with_process_addresses_names_the_interpreter_and_import_path_replicas_get(tmp_path) -> None:
    extra = tmp_path / "my_modules"
    extra.mkdir()
    done = vtrain("inspect", str(EXAMPLE), "--addresses", "process", env={"PYTHONPATH": str(extra),
                                                                        "JUPYTERHUB_API_TOKEN": "not-for-replicas"})
    assert done.returncode == 0, done.stderr
    said = done.stdout.splitlines()[-1]
    assert said.startswith(f"Process replicas run with {sys.executable}; import path ")
    assert str(extra) in said.split("; import path ")[1].split(";")[0].split(":")
    assert "PATH" in said and "JUPYTERHUB_API_TOKEN" not in said


def test_a_build_for_an_arm64_machine_on_an_amd64_only_base_is_refused_before_the_engine(tmp_path) -> None:
    (tmp_path / "task.py").write_text("print('never built')\n")
    done = vtrain("build", str(tmp_path / "task.py"), "--machine-type", "a4x-highgpu-4g", "--engine", "unix:///nowhere")
    assert done.returncode == 2
    assert done.stderr.startswith("vtrain: error: --base-image: the default, us-docker.pkg.dev/vertex-ai/training/")
    assert "linux/amd64 only" in done.stderr and len(done.stderr.splitlines()) == 1


LEGACY_TUNED = {"jobId": "legacy_tuned", "trainingInput": {
    "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerType": "n1-standard-4", "workerCount": 1,
    "masterConfig": {"imageUri": "gcr.io/p/trainer:1"},
    "hyperparameters": {"goal": "MINIMIZE", "hyperparameterMetricTag": "loss", "maxTrials": 2, "maxParallelTrials": 1,
                        "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.001, "maxValue": 0.1}]}}}


def test_a_tuning_job_converted_to_rest_converts_and_inspects_again(tmp_path) -> None:
    import json

    from conftest import write_file

    legacy = write_file(tmp_path / "legacy.yaml", LEGACY_TUNED)
    body = vtrain("convert", str(legacy), "--to", "rest")
    assert body.returncode == 0 and json.loads(body.stdout)["maxTrialCount"] == 2
    tuning_body = tmp_path / "tuning.json"
    tuning_body.write_text(body.stdout)
    assert vtrain("convert", str(tuning_body), "--to", "rest").stdout == body.stdout  # it stays a tuning job
    for to in ("sdk", "gcloud-command"):  # what cannot hold the study says so, and writes the trials' job
        done = vtrain("convert", str(tuning_body if to == "sdk" else legacy), "--to", to)
        assert done.returncode == 0 and "it is a HyperparameterTuningJob on Vertex AI, which --to " in done.stderr
        assert "n1-standard-4" in done.stdout
    inspected = vtrain("inspect", str(tuning_body), "--trial", "2", "--json")
    assert inspected.returncode == 0, inspected.stderr
    assert {replica["env"]["CLOUD_ML_TRIAL_ID"] for replica in json.loads(inspected.stdout)} == {"2"}


def test_command_line_mistakes_are_one_line_and_leave_nothing(tmp_path) -> None:
    from conftest import pool, write_spec

    spec = write_spec(tmp_path / "one.yaml", [pool(1, code="print('ran')")])
    cases = [
        (["run", str(spec), "--job-dir", "gs://b/runs/r1"],
         "--job-dir: 'gs://b/runs/r1' is not a folder on this machine"),
        (["run", str(spec), "--job-dir", ""], "--job-dir: '' is not a folder on this machine"),
        (["inspect", str(spec), "--trial", "abc"], "argument --trial: not a whole number: 'abc'"),
        (["inspect", str(spec), "--trial", "0"], "argument --trial: must be at least 1, not 0"),
        (["convert", str(spec), "--to", "rest", "--region", "europe-west4"], "--region: only with --to gcloud-command"),
        (["convert", str(spec), "--to", "gcloud-command", "--yaml"], "--yaml: --to gcloud-command writes a command"),
    ]
    for argv, message in cases:
        done = subprocess.run([sys.executable, "-m", "jupyter_ext.cli", *argv], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)
        assert done.returncode == 2 and done.stderr.startswith(f"vtrain: error: {message}"), (argv, done.stderr)
        assert len(done.stderr.splitlines()) == 1, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.yaml"]  # no ./gs:/ folder, no job folder


def test_credentials_in_urls_are_masked_in_error_lines(tmp_path) -> None:
    from conftest import pool, write_spec

    package = pool(1, code="pass")
    package["pythonPackageSpec"] = {"executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest",
                                    "packageUris": ["https://alice:s3cr3tpw@example.com/pkg.tar.gz"],
                                    "pythonModule": "trainer.task"}
    package.pop("containerSpec", None)
    runs = write_spec(tmp_path / "package.yaml", [package])
    network = write_spec(tmp_path / "network.yaml", [pool(1, code="pass")], network="https://bob:pw777@x")
    for argv in (["run", str(runs)], ["validate", str(network)]):
        done = vtrain(*argv)
        assert done.returncode in (1, 2) and "https://***@" in done.stdout + done.stderr, done.stderr
        assert "s3cr3tpw" not in done.stdout + done.stderr and "pw777" not in done.stdout + done.stderr


def test_a_job_too_big_to_list_is_one_line_not_the_machines_memory(tmp_path) -> None:
    from conftest import pool, write_spec

    spec = write_spec(tmp_path / "typo.yaml", [pool(1), {**pool(1), "replicaCount": "1000000000000"}])
    done = vtrain("inspect", str(spec))
    assert done.returncode == 2 and done.stderr == (
        "vtrain: error: workerPoolSpecs: 1,000,000,000,001 replicas: too many to work out each one's environment "
        "here (at most 1,000; every replica's names all the others)\n")
    assert vtrain("validate", str(spec)).stdout == "ok\n"  # Vertex AI decides how many it gives; listing is ours


def test_service_options_out_of_range_are_refused_before_it_starts() -> None:
    for flag, value, message in (("--read-quota", "-1", "must be at least 0, not -1"),
                                 ("--ingestion-delay", "nan", "must be between 0 and 3600 seconds, not nan"),
                                 ("--ingestion-delay", "inf", "must be between 0 and 3600 seconds, not inf"),
                                 ("--ingestion-jitter", "-1", "must be between 0 and 3600 seconds, not -1")):
        done = vtrain("service", "start", f"{flag}={value}")
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"vtrain: error: argument {flag}: {message}"), done.stderr


def test_legacy_hyperparameters_take_ai_platforms_enum_numbers_as_their_names(tmp_path) -> None:
    """goal, type and scaleType by number (googleapis' google/cloud/ml/v1/job_service.proto) are the job by name."""
    import copy

    from conftest import write_file

    numbered = copy.deepcopy(LEGACY_TUNED)
    hyperparameters = numbered["trainingInput"]["hyperparameters"]
    hyperparameters["goal"] = 2  # MINIMIZE
    hyperparameters["params"][0].update(type=1, scaleType=2)  # DOUBLE, UNIT_LOG_SCALE
    named = copy.deepcopy(LEGACY_TUNED)
    named["trainingInput"]["hyperparameters"]["params"][0]["scaleType"] = "UNIT_LOG_SCALE"
    outputs = [vtrain("convert", str(write_file(tmp_path / f"{name}.yaml", job)), "--to", "rest")
               for name, job in (("numbered", numbered), ("named", named))]
    assert all(done.returncode == 0 for done in outputs), [done.stderr for done in outputs]
    assert outputs[0].stdout == outputs[1].stdout and '"goal": "MINIMIZE"' in outputs[0].stdout


def test_a_tuning_body_with_a_wrong_value_names_its_field(tmp_path) -> None:
    import json

    body = json.loads(vtrain("convert", str(_legacy_tuned(tmp_path)), "--to", "rest").stdout)
    body["studySpec"]["parameters"][0]["doubleValueSpec"]["minValue"] = "low"
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps(body))
    done = vtrain("validate", str(path))
    assert done.returncode == 2 and done.stderr == (
        "vtrain: error: studySpec.parameters[0].doubleValueSpec.minValue: not a number: 'low'\n")


def _legacy_tuned(tmp_path):
    from conftest import write_file

    return write_file(tmp_path / "legacy.yaml", LEGACY_TUNED)


def test_a_gcloud_config_says_what_only_gclouds_flags_hold(tmp_path) -> None:
    from conftest import pool, write_file

    job = write_file(tmp_path / "job.json", {"displayName": "labelled", "labels": {"team": "vision"},
                                             "jobSpec": {"workerPoolSpecs": [pool(1)]}})
    done = vtrain("convert", str(job), "--to", "gcloud")
    assert done.returncode == 0 and "labels" not in done.stdout
    assert done.stderr == ("vtrain: note: a --config file cannot hold labels; gcloud takes them as --labels and "
                           "--kms-key (--to gcloud-command writes the whole command)\n")
