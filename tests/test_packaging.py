"""Trainer packaging: the codelab's layout, determinism, secrets kept out, base images, sdists."""

from __future__ import annotations

import fnmatch
import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import log_lines, pool, write_spec

from jupyter_ext import packaging
from jupyter_ext.packaging import PackagingError, build_context, resolve_base_image, write_context
from jupyter_ext.runner import Supervisor
from jupyter_ext.spec import JobSpec

CELL = "import sys\nprint('training', sys.argv[1:])\n"
PREBUILT = "us-docker.pkg.dev/vertex-ai/training"
SECRET_PATTERNS = (".env", ".env.*", "*.pem", "*.key", "*.p12")
SERVICE_ACCOUNT = json.dumps({"type": "service_account", "project_id": "p", "private_key_id": "abc",
                              "private_key": "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
                              "client_email": "sa@p.iam.gserviceaccount.com"})


def tiny_wheel(folder: Path, name: str = "tinydep", version: str = "0.1") -> Path:
    """A pure-Python wheel made with the standard library (installs offline)."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr(f"{name}/__init__.py", "VALUE = 42\n")
        whl.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        whl.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
                                      "Tag: py3-none-any\n")
        whl.writestr(f"{info}/RECORD", "")
    return path


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _secret_folder(root: Path) -> Path:
    """A trainer folder with every kind of file that must stay out."""
    pkg = root / "trainer"
    (pkg / "util").mkdir(parents=True)
    (pkg / "task.py").write_text("from trainer.util import helper\nprint(helper.VALUE)\n")
    (pkg / "util" / "__init__.py").write_text("")
    (pkg / "util" / "helper.py").write_text("VALUE = 'ok'\n")
    (pkg / "vocab.json").write_text('{"a": 1}')
    (pkg / ".env").write_text("API_KEY=secret\n")
    (pkg / ".env.local").write_text("API_KEY=secret\n")
    (pkg / "server.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    (pkg / "tls.key").write_text("-----BEGIN PRIVATE KEY-----\n")
    (pkg / "store.P12").write_bytes(b"\x30\x82")
    (pkg / "my-project-1a2b3c.json").write_text(SERVICE_ACCOUNT)  # a key by content, not by name
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "task.cpython-311.pyc").write_bytes(b"\x00")
    (pkg / ".ipynb_checkpoints").mkdir()
    (pkg / ".ipynb_checkpoints" / "task-checkpoint.py").write_text("old\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[remote]\n")
    (pkg / ".git").mkdir()
    (pkg / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "requirements.txt").write_text("# pinned\nsix==1.16.0\n\n")
    (root / "notes.md").write_text("not part of the trainer\n")
    return root


def test_a_cell_gives_byte_identical_contexts(tmp_path: Path) -> None:
    one = build_context(CELL, requirements=["six==1.16.0"], base_image="tf")
    two = build_context(CELL, requirements=["six==1.16.0"], base_image="tf")
    assert one.files == two.files and one.digest == two.digest
    write_context(one, tmp_path / "a")
    write_context(two, tmp_path / "b")
    assert _files(tmp_path / "a") == _files(tmp_path / "b") == one.files
    assert sorted(one.files) == [".dockerignore", "Dockerfile", "requirements.txt", "trainer/__init__.py",
                                 "trainer/task.py"]
    assert one.files["trainer/task.py"] == CELL.encode() and one.files["trainer/__init__.py"] == b""
    assert packaging.context_tar(one) == packaging.context_tar(two)
    assert build_context(CELL + "# edit\n").digest != one.digest


def test_the_dockerfile_has_the_codelab_shape_with_dependencies_first() -> None:
    ctx = build_context(CELL, requirements=["six==1.16.0"], base_image="tf")
    lines = ctx.files["Dockerfile"].decode().splitlines()
    assert lines[1:] == [
        f"FROM {PREBUILT}/tf-cpu.2-17.py310:latest",
        "WORKDIR /",
        "COPY requirements.txt /requirements.txt",
        "RUN python -m pip install --no-cache-dir -r /requirements.txt",
        "COPY trainer /trainer",
        'ENTRYPOINT ["python", "-m", "trainer.task"]',
    ]
    no_deps = build_context(CELL).files["Dockerfile"].decode().splitlines()
    assert "requirements.txt" not in build_context(CELL).files
    assert no_deps[2:] == ["WORKDIR /", "COPY trainer /trainer", 'ENTRYPOINT ["python", "-m", "trainer.task"]']


def test_secrets_and_caches_never_enter_the_context(tmp_path: Path) -> None:
    folder = _secret_folder(tmp_path / "src")
    one, two = build_context(folder), build_context(folder)
    assert one.files == two.files
    assert sorted(one.files) == [".dockerignore", "Dockerfile", "requirements.txt", "trainer/__init__.py",
                                 "trainer/task.py", "trainer/util/__init__.py", "trainer/util/helper.py",
                                 "trainer/vocab.json"]
    for rel, data in one.files.items():
        parts = Path(rel).parts
        assert not any(fnmatch.fnmatch(part.lower(), pat) for part in parts for pat in SECRET_PATTERNS), rel
        assert ".git" not in parts and "__pycache__" not in parts and ".ipynb_checkpoints" not in parts
        assert b"PRIVATE KEY" not in data and b"API_KEY" not in data, rel
    assert set(one.skipped) == {"trainer/.env", "trainer/.env.local", "trainer/server.pem", "trainer/tls.key",
                                "trainer/store.P12", "trainer/my-project-1a2b3c.json", "trainer/__pycache__/",
                                "trainer/.ipynb_checkpoints/", "trainer/.git/"}
    assert one.files["requirements.txt"] == b"six==1.16.0\n"  # the folder's, comments dropped
    ignore = one.files[".dockerignore"].decode().splitlines()
    for pattern in ("**/.env", "**/*.pem", "**/*.key", "**/*.p12", "**/.git", "**/__pycache__",
                    "**/.ipynb_checkpoints", "**/*service-account*.json"):
        assert pattern in ignore
    # written out, the folder holds exactly the context: nothing else copied along
    write_context(one, tmp_path / "out")
    assert _files(tmp_path / "out") == one.files


def test_extra_files_that_are_secrets_are_left_out() -> None:
    ctx = build_context(CELL, extra_files={"config.yaml": "lr: 0.1\n", "keys/sa.json": SERVICE_ACCOUNT,
                                           "certs/ca.pem": b"x"})
    assert "trainer/config.yaml" in ctx.files
    assert not any(k.startswith(("trainer/keys", "trainer/certs")) for k in ctx.files)
    assert ctx.skipped == ("extra_files['certs/ca.pem']", "extra_files['keys/sa.json']")
    with pytest.raises(PackagingError, match=r"extra_files: '\.\./x' must be a relative path"):
        build_context(CELL, extra_files={"../x": "y"})


def test_a_file_and_a_flat_folder_become_trainer_task(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(CELL)
    assert build_context(script).files["trainer/task.py"] == CELL.encode()
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "task.py").write_text(CELL)
    (flat / "model.py").write_text("X = 1\n")
    (flat / "Dockerfile").write_text("FROM nothing\n")  # the user's build files are not trainer code
    files = build_context(flat).files
    assert {"trainer/task.py", "trainer/model.py", "trainer/__init__.py"} <= set(files)
    assert "trainer/Dockerfile" not in files
    (tmp_path / "empty").mkdir()
    with pytest.raises(PackagingError, match="no trainer found; expected trainer/task.py or task.py"):
        build_context(tmp_path / "empty")
    with pytest.raises(PackagingError, match="no such file or folder"):
        build_context(tmp_path / "missing")


def test_a_written_context_used_as_input_gives_the_same_context(tmp_path: Path) -> None:
    ctx = build_context(CELL, requirements=[str(tiny_wheel(tmp_path)), "six"], base_image="tf")
    assert build_context(write_context(ctx, tmp_path / "ctx"), base_image="tf").files == ctx.files


def test_local_wheels_are_copied_and_installed_before_the_code(tmp_path: Path) -> None:
    wheel = tiny_wheel(tmp_path)
    req = tmp_path / "requirements.txt"
    req.write_text(f"{wheel.name}\nsix\n")  # relative to the requirements file
    ctx = build_context(CELL, requirements=req)
    assert ctx.files["deps/tinydep-0.1-py3-none-any.whl"] == wheel.read_bytes()
    assert ctx.files["requirements.txt"] == b"/deps/tinydep-0.1-py3-none-any.whl\nsix\n"
    lines = ctx.files["Dockerfile"].decode().splitlines()
    assert lines.index("COPY deps /deps") < lines.index("COPY trainer /trainer")
    with pytest.raises(PackagingError, match="local folders cannot be installed"):
        build_context(CELL, requirements=[str(tmp_path)])


@pytest.mark.parametrize(("name", "gpu", "expected"), [
    (None, False, f"{PREBUILT}/tf-cpu.2-17.py310:latest"),
    ("tf", True, f"{PREBUILT}/tf-gpu.2-17.py310:latest"),
    ("tf-cpu", True, f"{PREBUILT}/tf-cpu.2-17.py310:latest"),  # an explicit variant wins
    ("tf:2.16", False, f"{PREBUILT}/tf-cpu.2-16.py310:latest"),
    ("tf-gpu.2-17.py310", False, f"{PREBUILT}/tf-gpu.2-17.py310:latest"),
    ("pytorch-gpu", False, f"{PREBUILT}/pytorch-gpu.2-4.py310:latest"),
    ("pytorch", True, f"{PREBUILT}/pytorch-gpu.2-4.py310:latest"),
    ("sklearn", False, f"{PREBUILT}/sklearn-cpu.1-6:latest"),
    ("sklearn", True, f"{PREBUILT}/sklearn-gpu.1-6:latest"),
    ("xgboost", False, f"{PREBUILT}/xgboost-cpu.2-1:latest"),
    ("python:3.11-slim", True, "python:3.11-slim"),
    ("gcr.io/p/base:1", False, "gcr.io/p/base:1"),
])
def test_base_images_by_name(name: str | None, gpu: bool, expected: str) -> None:
    assert resolve_base_image(name, gpu=gpu) == expected


def test_base_image_errors_and_regions() -> None:
    assert resolve_base_image("tf", region="europe").startswith("europe-docker.pkg.dev/vertex-ai/training/")
    with pytest.raises(PackagingError, match="xgboost has no prebuilt GPU training image"):
        resolve_base_image("xgboost", gpu=True)


def test_the_gpu_variant_follows_the_primary_pool() -> None:
    gpu_job = JobSpec.from_dict({"workerPoolSpecs": [
        pool(machine="n1-standard-8", accelerator="NVIDIA_TESLA_T4", accelerator_count=1, image="x")]})
    cpu_job = JobSpec.from_dict({"workerPoolSpecs": [pool(machine="n1-standard-8", image="x")]})
    assert packaging.primary_has_gpu(gpu_job) and not packaging.primary_has_gpu(cpu_job)
    ctx = build_context(CELL, gpu=packaging.primary_has_gpu(gpu_job))
    assert ctx.base_image == f"{PREBUILT}/tf-gpu.2-17.py310:latest"


def test_write_context_refuses_a_folder_it_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("keep me")
    with pytest.raises(PackagingError, match="not empty and not a context vtrain wrote"):
        write_context(build_context(CELL), tmp_path / "mine")
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "keep me"
    out = write_context(build_context(CELL, requirements=["six"]), tmp_path / "ctx")
    write_context(build_context(CELL), out)  # a previous context is replaced, stale files go
    assert not (out / "requirements.txt").exists()


def test_the_sdist_is_deterministic_and_runs_as_a_python_package_job(tmp_path: Path) -> None:
    folder = _secret_folder(tmp_path / "src")
    ctx = build_context(folder)
    name, data = packaging.sdist(ctx)
    assert name == "trainer-0.1.tar.gz" and packaging.sdist(build_context(folder)) == (name, data)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
        assert all(m.mtime == packaging.EPOCH and m.uid == 0 and m.gid == 0 for m in members)
        names = [m.name for m in members if m.isfile()]
        setup_py = tar.extractfile("trainer-0.1/setup.py").read().decode()  # type: ignore[union-attr]
    assert names == sorted(names)
    assert {"trainer-0.1/setup.py", "trainer-0.1/PKG-INFO", "trainer-0.1/trainer/task.py",
            "trainer-0.1/trainer/util/helper.py", "trainer-0.1/trainer/vocab.json"} <= set(names)
    assert not any(n.endswith((".env", ".pem", "1a2b3c.json")) for n in names)
    assert "packages=['trainer', 'trainer.util']" in setup_py and "install_requires=['six==1.16.0']" in setup_py
    sdist_path = packaging.write_sdist(ctx, tmp_path / "dist")
    spec = write_spec(tmp_path / "job.yaml", [{
        "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1,
        "pythonPackageSpec": {"executorImageUri": f"{PREBUILT}/tf-cpu.2-17.py310:latest",
                              "packageUris": [str(sdist_path)], "pythonModule": "trainer.task"}}])
    result = Supervisor(JobSpec.load(spec), job_dir=tmp_path / "job").run()
    assert result.state == "SUCCEEDED", result.error
    assert [text for _, _, text in log_lines(tmp_path / "job", "workerpool0-0")] == ["ok"]


def test_an_sdist_cannot_carry_local_wheels(tmp_path: Path) -> None:
    ctx = build_context(CELL, requirements=[str(tiny_wheel(tmp_path))])
    with pytest.raises(PackagingError, match="local dependency tinydep-0.1-py3-none-any.whl cannot go into"):
        packaging.sdist(ctx)


@pytest.mark.parametrize("base", [None, "tf", "pytorch-gpu", f"{PREBUILT}/tf-gpu.2-17.py310:latest"])
def test_an_arm64_build_refuses_a_linux_amd64_only_base_before_building(base: str | None) -> None:
    """Vertex AI's prebuilt training images (the default base `tf` among them) are built for linux/amd64 only:
    an image for an arm64 machine (A4X) cannot start FROM one. One line naming --base-image, no build."""
    with pytest.raises(PackagingError) as error:
        build_context(CELL, base_image=base, platform="linux/arm64")
    message = str(error.value)
    assert message.startswith("--base-image: ") and "\n" not in message
    assert "linux/amd64 only" in message and "linux/arm64" in message
    assert build_context(CELL, base_image=base).base_image.startswith(PREBUILT)  # fine for linux/amd64


def test_an_arm64_build_takes_a_base_image_of_the_users_choice() -> None:
    context = build_context(CELL, base_image="python:3.11-slim", platform="linux/arm64")
    assert context.files["Dockerfile"].decode().splitlines()[1] == "FROM python:3.11-slim"
