"""Secrets stay on this machine and out of sight: credential files never enter a build context or
its image, credentials in requirement URLs are refused (and masked where named), the job's `env`
values are `***` in every display (the replicas get the real ones), and the workbench's data
folder and its files are for their owner only."""

from __future__ import annotations

import io
import json
import stat
import tarfile
from pathlib import Path

import pytest
from conftest import pool, vtrain, vtrain_in_process, write_file
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from jupyter_ext import packaging, sensitive
from jupyter_ext.errors import PackagingError
from widgets import ClusterInspector

SECRET = "s3cr3t-Value"
KEY_JSON = json.dumps({"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\n"})
# Google credential files of other kinds, recognised by content: workload identity federation, impersonation,
# OAuth clients (an "installed" app's or a "web" app's client secret)
EXTERNAL_ACCOUNT_JSON = json.dumps({"type": "external_account", "audience": "//iam.googleapis.com/x",
                                    "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
                                    "credential_source": {"file": "/var/run/token"}})
IMPERSONATED_JSON = json.dumps({"type": "impersonated_service_account", "service_account_impersonation_url": "u",
                                "source_credentials": {"type": "authorized_user", "refresh_token": "r"}})
INSTALLED_CLIENT_JSON = json.dumps({"installed": {"client_id": "1.apps.googleusercontent.com", "client_secret": "s"}})
WEB_CLIENT_JSON = json.dumps({"web": {"client_id": "1.apps.googleusercontent.com", "client_secret": "s"}})
# every kind of credential file a trainer folder may hold by accident (path -> content)
SECRET_FILES = {
    "id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----", "id_ed25519": "k", "id_ecdsa": "k", "id_dsa": "k",
    ".ssh/config": "Host *", ".ssh/known_hosts": "h", ".aws/credentials": "[default]\naws_secret_access_key=x",
    ".docker/config.json": '{"auths": {}}', ".kube/config": "apiVersion: v1", ".boto": "[Credentials]",
    ".config/gcloud/access_tokens.db": "x", ".config/gcloud/configurations/config_default": "[core]",
    ".git-credentials": "https://u:p@github.com", ".npmrc": "//registry/:_authToken=x", "cert.pfx": "x",
    "store.jks": "x", "bundle.p12": "x", ".env": "A=1", "tls.key": "k", "ca.pem": "c", ".netrc": "machine m",
    ".pypirc": "[pypi]", ".git/config": "[core]", "data/ssh/id_rsa": "k", "anything.json": KEY_JSON,
    ".pgpass": "h:5432:db:u:p", ".s3cfg": "[default]\nsecret_key=x", ".vault-token": "hvs.x", ".envrc": "export A=1",
    ".gnupg/pubring.kbx": "k", ".gnupg/private-keys-v1.d/k.key": "k", "putty.ppk": "k", "AuthKey_X.p8": "k",
    "client_secret_1.apps.googleusercontent.com.json": "{}", "wif.json": EXTERNAL_ACCOUNT_JSON,
    "impersonate.json": IMPERSONATED_JSON, "oauth/desktop.json": INSTALLED_CLIENT_JSON, "web.json": WEB_CLIENT_JSON,
    "broken.json": '{"refresh_token": ' + "[" * 100_000,  # names a key, nested too deep to read: kept out
}
# look alike, but are not credentials: kept
KEPT_FILES = {"config.py": "X = 1", "data/config.json": "{}", ".aws/config": "[default]\nregion=x", "kube.py": "",
              ".config/app.toml": "", "ssh_utils.py": "", "data/accounts.json": '{"type": "bank_account"}',
              "data/deep.json": "[" * 100_000, "data/site.json": '{"web": {"title": "home"}}'}


def trainer_folder(root: Path) -> Path:
    for rel, text in {"task.py": "print('training')\n", **SECRET_FILES, **KEPT_FILES}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


# ---- the deny-list ---------------------------------------------------------------------------------------------------

def test_credential_files_never_enter_a_context_or_its_tar(tmp_path):
    ctx = packaging.build_context(trainer_folder(tmp_path / "src"))
    packaged = {rel.removeprefix("trainer/") for rel in ctx.files if rel.startswith("trainer/")}
    assert packaged == {"__init__.py", "task.py", *KEPT_FILES}
    with tarfile.open(fileobj=io.BytesIO(packaging.context_tar(ctx))) as tar:
        names = tar.getnames()
    for rel in SECRET_FILES:
        assert not any(name.endswith(rel) for name in names), rel
    # what was left out is listed: a folder once, a file by its path
    assert {".ssh/", ".aws/credentials", ".docker/config.json", ".config/gcloud/", ".git/", "id_rsa",
            "anything.json", "data/ssh/id_rsa", ".gnupg/", "wif.json", "oauth/desktop.json"} <= set(ctx.skipped)
    # the .dockerignore of a context written for `docker build` says the same
    ignore = ctx.files[".dockerignore"].decode()
    for pattern in ("**/id_rsa*", "**/.ssh", "**/.aws/credentials", "**/.docker/config.json", "**/.kube/config",
                    "**/.config/gcloud", "**/.boto", "**/.git-credentials", "**/.npmrc", "**/*.pfx", "**/*.jks",
                    "**/.pgpass", "**/.s3cfg", "**/.vault-token", "**/.envrc", "**/.gnupg", "**/*.ppk", "**/*.p8",
                    "**/.netrc", "**/client_secret*.json"):
        assert pattern in ignore.splitlines()


def test_extra_files_and_sdists_leave_credentials_out(tmp_path):
    ctx = packaging.build_context("print(1)\n", extra_files={".kube/config": "x", "keys/id_ed25519": "k",
                                                             "vocab.txt": "a b"})
    assert "trainer/vocab.txt" in ctx.files and ctx.skipped == ("extra_files['.kube/config']",
                                                                "extra_files['keys/id_ed25519']")
    _, data = packaging.sdist(packaging.build_context(trainer_folder(tmp_path / "src")))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert not any(sensitive.is_secret_path(n.split("/", 1)[1]) for n in tar.getnames() if "/" in n)


# ---- credentials in requirement URLs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("line,shown", [
    ("git+https://alice:ghp_T0KEN@github.com/org/lib.git", "git+https://***@github.com/org/lib.git"),
    ("lib @ https://ghp_T0KEN@github.com/org/lib/v1.zip", "lib @ https://***@github.com/org/lib/v1.zip"),
    ("--extra-index-url https://alice:pa55@pypi.example.com/simple",
     "--extra-index-url https://***@pypi.example.com/simple"),
    ("--index-url https://__token__:pa55@pypi.example.com/simple", "--index-url https://***@pypi.example.com/simple"),
    ("-i https://alice:pa55@pypi.example.com/simple", "-i https://***@pypi.example.com/simple"),
])
def test_credentials_in_a_requirement_url_are_refused_and_masked(tmp_path, line, shown):
    with pytest.raises(PackagingError) as raised:
        packaging.build_context("print(1)\n", requirements=["numpy", line])
    message = str(raised.value)
    assert message.startswith(f"--requirements: {shown!r}: a password or token in a URL would be stored in the image")
    assert "T0KEN" not in message and "pa55" not in message and "\n" not in message
    (tmp_path / "requirements.txt").write_text(f"numpy\n{line}\n")  # the same from a requirements file
    with pytest.raises(PackagingError, match="password or token"):
        packaging.build_context("print(1)\n", requirements=tmp_path / "requirements.txt")


def test_urls_without_credentials_are_kept():
    lines = ["git+ssh://git@github.com/org/lib.git", "--extra-index-url https://pypi.example.com/simple",
             "lib @ https://example.com/lib-1.0.tar.gz"]
    assert packaging.build_context("print(1)\n", requirements=lines).requirements == tuple(lines)


@pytest.mark.parametrize("text,shown", [
    ("https://tok3n@h.example/simple", "https://***@h.example/simple"),  # a token as the user name
    ("https://u:pa55@h.example", "https://***@h.example"),
    ("https://u:p@ss@h.example/simple", "https://***@h.example/simple"),  # '@' in the password
    ("https://u:p@ss@h.example", "https://***@h.example"),
    ("https://me@corp:p@ss@h.example:8443/x?a=b@c", "https://***@h.example:8443/x?a=b@c"),  # '@' in both
    ("git+https://alice:p@ss@github.com/o/l.git@v1", "git+https://***@github.com/o/l.git@v1"),
    ("--extra-index-url https://u:p@ss@pypi.example/simple", "--extra-index-url https://***@pypi.example/simple"),
    ("""sh -c "pip install -i 'https://u:p@ss@pypi.example' lib && echo me@home\"""",
     """sh -c "pip install -i 'https://***@pypi.example' lib && echo me@home\""""),
    ('["https://u:p@ss@a.example/s", "https://t@b.example"]', '["https://***@a.example/s", "https://***@b.example"]'),
    ("mail me@home.example, not a URL", "mail me@home.example, not a URL"),
    ("git+ssh://git@github.com/o/l.git", "git+ssh://git@github.com/o/l.git"),  # a user name over SSH: no secret
])
def test_mask_urls_hides_all_of_the_userinfo(text, shown):
    assert sensitive.mask_urls(text) == shown


def test_vtrain_build_refuses_them_in_one_masked_line(tmp_path):
    (tmp_path / "task.py").write_text("print(1)\n")
    done = vtrain("build", str(tmp_path / "task.py"), "--requirements",
                  "git+https://alice:ghp_T0KEN@github.com/o/l.git", timeout=60)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.startswith("vtrain: error: --requirements: 'git+https://***@github.com/o/l.git': ")
    assert len(done.stderr.splitlines()) == 1 and "T0KEN" not in done.stderr


def test_the_magic_refuses_them_before_any_dry_run(ipython):
    with capture_output() as out, pytest.raises(UsageError, match=r"'git\+https://\*\*\*@github.com/o/l.git'"):
        ipython.run_cell_magic("vertex_train", "--requirements git+https://alice:ghp_T0KEN@github.com/o/l.git "
                                               "--dry-run", "print(1)")
    assert "T0KEN" not in out.stdout + out.stderr


# ---- env values in every display -------------------------------------------------------------------------------------

def job_with_env(tmp_path: Path) -> Path:
    return write_file(tmp_path / "job.json", {"displayName": "envy", "jobSpec": {"workerPoolSpecs": [
        pool(env={"API_TOKEN": SECRET, "MODE": "fast"}), pool(2, env={"API_TOKEN": SECRET})]}})


def test_vtrain_inspect_masks_env_values_unless_asked(capsys, tmp_path):
    path = str(job_with_env(tmp_path))
    for argv in (["--json"], ["--replica", "workerpool1-1"], ["--replica", "workerpool0-0", "--addresses", "process"],
                 []):
        code, out, err = vtrain_in_process(capsys, "inspect", path, *argv)
        assert code == 0, err
        assert SECRET not in out and "fast" not in out, argv
    code, out, _ = vtrain_in_process(capsys, "inspect", path, "--json")
    first = json.loads(out)[0]["env"]
    for key in ("TF_CONFIG", "CLUSTER_SPEC"):
        env = json.loads(first[key])["job"]["workerPoolSpecs"][0]["containerSpec"]["env"]
        assert env == [{"name": "API_TOKEN", "value": "***"}, {"name": "MODE", "value": "***"}]
    code, out, _ = vtrain_in_process(capsys, "inspect", path, "--replica", "workerpool0-0")
    assert "API_TOKEN=***\nMODE=***\n" in out and "--show-env-values shows the values" in out
    code, out, _ = vtrain_in_process(capsys, "inspect", path, "--replica", "workerpool0-0", "--show-env-values")
    assert f"API_TOKEN={SECRET}\nMODE=fast\n" in out and f'"value": "{SECRET}"' in out


def test_the_dry_run_masks_env_values(ipython):
    with capture_output() as out:
        ipython.run_cell_magic("vertex_train", f"--workers 1 --env API_TOKEN={SECRET} --dry-run --name dry-env",
                               "print(1)")
    assert SECRET not in out.stdout and '"name": "API_TOKEN",\n' in out.stdout
    assert '"value": "***"' in out.stdout  # the REST body
    assert out.stdout.count('{"name": "API_TOKEN", "value": "***"}') == 2 * 2 * 2  # 2 replicas, 2 pools, 2 views


def test_the_inspector_never_shows_env_values(tmp_path):
    inspector = ClusterInspector(str(job_with_env(tmp_path)))
    for replica in ("workerpool0-0", "workerpool1-1"):
        inspector.selected = replica
        assert SECRET not in inspector.to_html() and SECRET not in json.dumps(inspector.env_html.get_state())
        assert "***" in inspector.env_html.value
    assert SECRET not in json.dumps(inspector._repr_mimebundle_())


PIP_CREDENTIAL = "hunter2"
PIP_COMMAND = f"pip install --extra-index-url https://bob:{PIP_CREDENTIAL}@pypi.example/simple lib && python -m t"


def test_credentials_in_a_jobs_command_and_args_are_masked_in_every_display(capsys, tmp_path, ipython):
    path = write_file(tmp_path / "job.json", {"displayName": "pip", "jobSpec": {"workerPoolSpecs": [
        pool(command=["sh", "-c", PIP_COMMAND], args=[f"--data=https://{PIP_CREDENTIAL}@data.example/x"]),
        pool(1, env={"INDEX": f"https://bob:{PIP_CREDENTIAL}@pypi.example/simple"})]}})
    for argv in (["--json"], ["--replica", "workerpool0-0"], ["--replica", "workerpool1-0", "--addresses", "process"]):
        code, out, err = vtrain_in_process(capsys, "inspect", str(path), *argv)
        assert code == 0, err
        assert PIP_CREDENTIAL not in out and "https://bob:***" not in out, argv
    code, out, _ = vtrain_in_process(capsys, "inspect", str(path), "--json")
    job = json.loads(json.loads(out)[0]["env"]["CLUSTER_SPEC"])["job"]["workerPoolSpecs"][0]["containerSpec"]
    assert job["command"][2] == PIP_COMMAND.replace(f"bob:{PIP_CREDENTIAL}", "***")
    assert job["args"] == ["--data=https://***@data.example/x"]
    inspector = ClusterInspector(str(path))
    assert PIP_CREDENTIAL not in inspector.to_html() and PIP_CREDENTIAL not in json.dumps(inspector._repr_mimebundle_())
    with capture_output() as out:
        ipython.run_cell_magic("vertex_train", f'--args "--index https://bob:{PIP_CREDENTIAL}@pypi.example/simple" '
                                               "--dry-run --name dry-pip", "print(1)")
    assert PIP_CREDENTIAL not in out.stdout and '"https://***@pypi.example/simple"' in out.stdout


def test_a_job_body_as_shown_masks_env_values_and_url_credentials_at_any_depth():
    body = {"jobSpec": {"workerPoolSpecs": [{"containerSpec": {
        "command": ["sh", "-c", PIP_COMMAND], "args": [], "env": [{"name": "A", "value": "https://u:p@h"}]}},
        {"pythonPackageSpec": {"packageUris": [f"https://bob:{PIP_CREDENTIAL}@files.example/t.tar.gz"]}}]},
        "labels": {"source": f"git+https://{PIP_CREDENTIAL}@github.com/o/r"}, "replicaCount": 2}
    shown = sensitive.mask_job(body)
    assert PIP_CREDENTIAL not in json.dumps(shown) and "u:p@h" not in json.dumps(shown)
    assert shown["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["env"] == [{"name": "A", "value": "***"}]
    assert shown["jobSpec"]["workerPoolSpecs"][1]["pythonPackageSpec"]["packageUris"] == [
        "https://***@files.example/t.tar.gz"]
    assert shown["labels"] == {"source": "git+https://***@github.com/o/r"} and shown["replicaCount"] == 2
    assert PIP_CREDENTIAL in json.dumps(body)  # a copy: the job itself keeps its values


def test_the_replicas_still_get_the_real_values(tmp_path):
    path = write_file(tmp_path / "job.json", {"workerPoolSpecs": [pool(env={"API_TOKEN": SECRET}, code=(
        "import json, os; print(os.environ['API_TOKEN'], "
        "json.loads(os.environ['CLUSTER_SPEC'])['job']['workerPoolSpecs'][0]['containerSpec']['env'][0]['value'])"))]})
    done = vtrain("run", str(path), "--job-dir", str(tmp_path / "job"), timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"[workerpool0-0] {SECRET} {SECRET}" in done.stdout


# ---- the data folder -------------------------------------------------------------------------------------------------

def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_data_folder_and_a_jobs_files_are_private(tmp_path):
    path = write_file(tmp_path / "job.json", {"workerPoolSpecs": [pool(code="print('hello')")]})
    home = tmp_path / "new" / "home"  # made by the run
    done = vtrain("run", str(path), env={"VTRAIN_HOME": str(home)}, timeout=120)
    assert done.returncode == 0, done.stderr
    (job_dir,) = (home / "jobs").iterdir()
    assert mode(home) == mode(home / "jobs") == mode(job_dir) == mode(job_dir / "logs") == 0o700
    for file in (job_dir / "job.json", job_dir / "status.json", job_dir / "logs" / "workerpool0-0.log"):
        assert mode(file) == 0o600, file


def test_the_services_files_are_private(tmp_path, monkeypatch):
    from jupyter_ext import launch
    from jupyter_ext.service import daemon

    home = tmp_path / "new" / "home"  # made by the service
    monkeypatch.setenv("VTRAIN_HOME", str(home))
    try:
        handle = launch.submit({"jobSpec": {"workerPoolSpecs": [pool(code="print('hello')")]}})
        assert handle.wait(timeout=120) == "JOB_STATE_SUCCEEDED", handle.error
        assert mode(home) == 0o700
        private = [home / "jobs.sqlite", daemon.token_file(), daemon.info_file(),
                   home / "jobs" / handle.id / "job.json", home / "jobs" / handle.id / "logs" / "workerpool0-0.log"]
        for file in private:
            assert mode(file) == 0o600, file
        for folder in (daemon.runtime_dir(), home / "jobs" / handle.id):
            assert mode(folder) == 0o700, folder
    finally:
        daemon.stop()


def test_why_a_state_could_not_be_saved_is_written_for_the_owner_only(tmp_path):
    """The reason a job's state could not be saved (kept next to its files for the next start) names the
    job's failure: it is private like the job's other files."""
    import sqlite3

    from google.cloud.aiplatform_v1 import types as v1

    from jupyter_ext import paths
    from jupyter_ext.service.jobs import JobManager
    from jupyter_ext.service.resources import UNSAVED_FILE
    from jupyter_ext.service.store import JobStore, StoredJob

    store, notes = JobStore(paths.job_store_file()), []
    manager = JobManager(store, paths.jobs_dir(), on_note=notes.append)
    stored = StoredJob("1", "projects/p/locations/l", paths.private_dir(paths.jobs_dir() / "1"), "process",
                       v1.CustomJob(display_name="unsaved"))
    store.add(stored)
    database = sqlite3.connect(paths.job_store_file())
    database.execute("CREATE TRIGGER full_disk BEFORE UPDATE ON jobs "
                     "BEGIN SELECT RAISE(ABORT, 'database or disk is full (injected)'); END")
    database.commit()
    database.close()
    assert manager.save(stored) is False and "database or disk is full (injected)" in notes[0]
    unsaved = stored.job_dir / UNSAVED_FILE
    assert "could not save the job's state" in unsaved.read_text() and mode(unsaved) == 0o600
    store.close()


def test_private_files_and_folders(tmp_path, _workbench_home):
    from jupyter_ext import paths

    _workbench_home.chmod(0o755)  # as an older version made it
    folder = paths.private_dir(_workbench_home / "a" / "b")
    assert mode(_workbench_home) == mode(_workbench_home / "a") == mode(folder) == 0o700
    paths.write_private(folder / "f.json", "{}")
    with open(folder / "log", "ab", opener=paths.private_opener) as f:
        f.write(b"x")
    assert mode(folder / "f.json") == mode(folder / "log") == mode(paths.private_file(folder / "db")) == 0o600
    assert sorted(p.name for p in folder.iterdir()) == ["db", "f.json", "log"]  # no partial file left
