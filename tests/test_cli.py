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
