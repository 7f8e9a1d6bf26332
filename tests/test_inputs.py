"""Hostile and mistaken inputs about files, arguments and bucket paths: each is one `vtrain: error:`
line and exit 2 from the CLI (the same line as a UsageError from the magic), never a traceback,
a hang or a file outside the workbench's bucket folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import pool, vtrain, vtrain_in_process, write_file, write_spec
from IPython.core.error import UsageError

from jupyter_ext import paths, staging
from jupyter_ext.errors import SpecError
from jupyter_ext.spec import MAX_JOB_FILE_BYTES, MAX_NESTING, JobSpec


def one_error_line(code: int, out: str, err: str) -> str:
    """The one `vtrain: error:` line of a refused command (exit 2, nothing on stdout, no traceback)."""
    assert (code, out) == (2, ""), err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vtrain: error: "), err
    return lines[0].removeprefix("vtrain: error: ")


def cli_error(*argv: str) -> str:
    """The one error line of `vtrain ARGV` run as a user runs it (its own process)."""
    done = vtrain(*argv, timeout=60)
    return one_error_line(done.returncode, done.stdout, done.stderr)


# ---- the job file itself --------------------------------------------------------------------------------------------

def test_a_binary_file_is_named_as_one(capsys):
    binary = Path(sys.executable).resolve()
    message = cli_error("validate", str(binary))
    assert message.startswith(f"job file {binary} is not UTF-8 text (byte 0x") and "binary file" in message
    # every command that reads a job says the same
    for command in ("inspect", "convert", "cost", "run"):
        assert one_error_line(*vtrain_in_process(capsys, command, str(binary))) == message


def test_a_missing_file_a_folder_and_a_pipe(capsys, tmp_path):
    assert one_error_line(*vtrain_in_process(capsys, "validate", str(tmp_path / "nope.json"))) == \
        f"no such job file: {tmp_path / 'nope.json'}"
    assert one_error_line(*vtrain_in_process(capsys, "validate", str(tmp_path))) == \
        f"job file {tmp_path} is a folder; give the job's JSON or YAML file"
    fifo = tmp_path / "job.fifo"
    os.mkfifo(fifo)
    # no writer ever opens the pipe: reading it would wait for ever
    assert cli_error("validate", str(fifo)) == \
        f"job file {fifo} is not a regular file (a pipe, socket or device); give a JSON or YAML file"


def test_an_unreadable_file(tmp_path):
    job = write_spec(tmp_path / "job.json", [pool()])
    job.chmod(0)
    argv = [sys.executable, "-m", "jupyter_ext.cli", "validate", str(job)]
    if os.geteuid() == 0:  # root reads any file: run the CLI without the capabilities that allow it
        assert shutil.which("setpriv"), "setpriv (util-linux) runs the CLI without root's file access"
        drop = "-dac_override,-dac_read_search"
        argv = ["setpriv", f"--inh-caps={drop}", f"--bounding-set={drop}", *argv]
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=60)
    assert one_error_line(done.returncode, done.stdout, done.stderr) == \
        f"cannot read job file {job}: Permission denied"


def test_a_link_that_leads_nowhere_readable(capsys, tmp_path):
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    assert one_error_line(*vtrain_in_process(capsys, "validate", str(loop))) == \
        f"cannot read job file {loop}: Too many levels of symbolic links"
    file = write_spec(tmp_path / "job.json", [pool()])
    assert one_error_line(*vtrain_in_process(capsys, "validate", str(file / "inside.json"))) == \
        f"cannot read job file {file / 'inside.json'}: Not a directory"


def test_text_that_is_not_utf8(capsys, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_bytes(yaml.safe_dump({"displayName": "café", "jobSpec": {"workerPoolSpecs": [pool()]}},
                                   allow_unicode=True).encode("latin-1"))
    message = one_error_line(*vtrain_in_process(capsys, "validate", str(job)))
    assert message.startswith(f"job file {job} is not UTF-8 text (byte 0xe9 at offset ")


def test_a_huge_file_is_not_read(capsys, tmp_path):
    job = tmp_path / "huge.yaml"
    with open(job, "wb") as f:
        f.truncate(MAX_JOB_FILE_BYTES + 1)  # sparse: nothing is written to disk
    assert one_error_line(*vtrain_in_process(capsys, "validate", str(job))) == \
        f"job file {job} is 10 MB, more than the 10 MB a job file may hold"
    with pytest.raises(SpecError, match="longer than 10 MB"):
        JobSpec.load("{" + " " * MAX_JOB_FILE_BYTES + "}")


# ---- what the text holds ------------------------------------------------------------------------------------------

BILLION_LAUGHS = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x]"] + [
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]" for prev, name in zip("abcdefgh", "bcdefghi")]) + "\n"


def test_yaml_aliases_that_expand_beyond_bounds_are_refused(capsys, tmp_path):
    job = tmp_path / "laughs.yaml"
    job.write_text(BILLION_LAUGHS)
    assert one_error_line(*vtrain_in_process(capsys, "validate", str(job))) == \
        f"job file {job}: its YAML aliases expand to more than 100000 values (line 6, column 4)"
    merged = tmp_path / "merged.yaml"  # merge keys expand too
    merged.write_text("a: &a {a1: 1, a2: 2, a3: 3, a4: 4, a5: 5, a6: 6, a7: 7, a8: 8, a9: 9}\n" + "".join(
        f"{name}: &{name} {{<<: [{', '.join([f'*{prev}'] * 9)}]}}\n" for prev, name in zip("abcdef", "bcdefg")))
    assert "its YAML aliases expand to more than 100000 values" in \
        one_error_line(*vtrain_in_process(capsys, "validate", str(merged)))
    recursive = tmp_path / "recursive.yaml"
    recursive.write_text("workerPoolSpecs: &pools [*pools]\n")
    assert one_error_line(*vtrain_in_process(capsys, "validate", str(recursive))) == \
        f"job file {recursive}: a YAML alias refers to a value that holds it (line 1, column 18)"


def test_yaml_aliases_within_bounds_load(capsys, tmp_path):
    """PyYAML writes an alias for every object a document holds twice: such a file is a job."""
    same = pool(2)
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump({"workerPoolSpecs": [pool(), same, {}, same]}))
    assert "*id001" in job.read_text()
    code, out, err = vtrain_in_process(capsys, "inspect", str(job), "--json")
    assert code == 0, err
    assert [r["task_name"] for r in json.loads(out)][-2:] == ["workerpool3-0", "workerpool3-1"]


@pytest.mark.parametrize("suffix,text", [
    (".json", "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1)),
    (".json", "[" * 100_000),  # deeper than Python's recursion limit, and not even closed
    (".yaml", "a:\n" + "".join(" " * n + "- \n" for n in range(1, MAX_NESTING + 2))),
], ids=["json", "json unclosed", "yaml"])
def test_nesting_too_deep(capsys, tmp_path, suffix, text):
    job = tmp_path / f"deep{suffix}"
    job.write_text(text)
    message = one_error_line(*vtrain_in_process(capsys, "validate", str(job)))
    assert message.startswith(f"job file {job}: nested deeper than {MAX_NESTING} levels (line ")
    too_deep: list = []
    for _ in range(MAX_NESTING * 40):
        too_deep = [too_deep]
    with pytest.raises(SpecError, match=f"nested deeper than {MAX_NESTING} levels"):
        JobSpec.load({"workerPoolSpecs": too_deep})


@pytest.mark.parametrize("changes, path, number", [
    ({"machineSpec": {"machineType": "n1-standard-8", "acceleratorType": 99, "acceleratorCount": 1}},
     "workerPoolSpecs[0].machineSpec.acceleratorType", 99),
    ({"diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}, "scheduling": {"strategy": 42}},
     "scheduling.strategy", 42),
], ids=["acceleratorType 99", "scheduling.strategy 42"])
def test_an_enum_number_its_enum_does_not_name_is_one_line_in_every_command(capsys, recwarn, tmp_path, changes,
                                                                              path, number):
    """proto3 JSON takes any number for an enum; reading 99 back gave a bare int (a traceback in `cost`
    and `convert --to legacy`) and a Python warning above the error."""
    pool_changes = {k: v for k, v in changes.items() if k != "scheduling"}
    body = {"workerPoolSpecs": [{**pool(), **pool_changes}], **{k: v for k, v in changes.items() if k == "scheduling"}}
    job = write_file(tmp_path / "job.json", body)
    for argv in (["validate"], ["inspect"], ["cost"], ["convert", "--to", "legacy"], ["run"]):
        message = one_error_line(*vtrain_in_process(capsys, argv[0], str(job), *argv[1:]))
        assert message.startswith(f"{path}: invalid value {number} (valid: "), (argv, message)
    assert [str(w.message) for w in recwarn] == []


def test_keys_that_are_not_text(capsys, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("trainingInput:\n  scaleTier: BASIC\n  1: x\n")
    assert one_error_line(*vtrain_in_process(capsys, "validate", str(job))) == \
        f"job file {job}: the key 1 is not text; quote it"


def test_values_yaml_reads_but_python_cannot_hold(capsys, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text("displayName: 2024-13-45\nworkerPoolSpecs: []\n")  # a timestamp with month 13
    assert one_error_line(*vtrain_in_process(capsys, "validate", str(job))).startswith(
        f"job file {job} holds a value that cannot be read: month must be in 1..12")


# ---- values of the wrong kind: one line naming the full path, in the words of JSON and YAML -----------------------

POOL = "- machineSpec: {machineType: n1-standard-4}\n  replicaCount: 1\n  containerSpec:\n    imageUri: gcr.io/p/t:1\n"


@pytest.mark.parametrize("text, message", [
    ("workerPoolSpecs:\n" + POOL + "    args: [--epochs, 5]\n",
     'workerPoolSpecs[0].containerSpec.args[1]: 5 is a number; write it as text ("5")'),
    ("workerPoolSpecs:\n" + POOL + "    env: [{name: A, value: 1}]\n",
     'workerPoolSpecs[0].containerSpec.env[0].value: 1 is a number; write it as text ("1")'),
    ("workerPoolSpecs:\n" + POOL + "    args: [--since, 2024-01-02]\n",
     'workerPoolSpecs[0].containerSpec.args[1]: 2024-01-02 is a date; write it as text ("2024-01-02")'),
    ("workerPoolSpecs:\n" + POOL + "    args: [--verbose, yes]\n",
     'workerPoolSpecs[0].containerSpec.args[1]: true is true or false; write it as text ("true")'),
    ("workerPoolSpecs:\n" + POOL + "    args: [!!binary aGVsbG8=]\n",
     "workerPoolSpecs[0].containerSpec.args[0]: binary data (YAML !!binary) is not text; write the text itself"),
    ("workerPoolSpecs:\n- machineSpec: n1-standard-4\n  containerSpec: {imageUri: gcr.io/p/t:1}\n",
     "workerPoolSpecs[0].machineSpec: expected a mapping (machineType, acceleratorType, ...), not text"),
    ("workerPoolSpecs:\n" + POOL + "x-pool: {}\n", "unknown field 'x-pool'"),
    ("workerPoolSpecs:\n" + POOL + "    imageUri: gcr.io/p/t:2\n".replace("imageUri", "image_uri"),
     "workerPoolSpecs[0].containerSpec.imageUri: given twice, as imageUri and as image_uri; keep one"),
    ("workerPoolSpecs:\n" + POOL + "  pythonPackageSpec: {pythonModule: t}\n",
     "workerPoolSpecs[0]: give only one of containerSpec or pythonPackageSpec"),
    ("workerPoolSpecs:\n" + POOL + "- null\n",
     "workerPoolSpecs[1]: null is not allowed here; remove it or give a value"),
    ("workerPoolSpecs:\n" + POOL + "scheduling: {timeout: 2h}\n",
     "scheduling.timeout: expected a duration in seconds such as \"3600s\", not '2h'"),
    ("workerPoolSpecs:\n" + POOL + "enableWebAccess: 'yes'\n",
     "enableWebAccess: must be true or false (without quotes), not text"),
    ("workerPoolSpecs:\n" + POOL.replace("replicaCount: 1", "replicaCount: 99999999999999999999"),
     "workerPoolSpecs[0].replicaCount: 99999999999999999999 is out of range"),
    ("displayName: j\nlabels: {team: 7}\njobSpec:\n  workerPoolSpecs:\n  - {containerSpec: {imageUri: gcr.io/p/t:1}}\n",
     "labels['team']: 7 is a number; write it as text (\"7\")"),
    ("display_name: j\nworker_pool_specs:\n" + POOL.replace("containerSpec", "container_spec") + "    args: [5]\n",
     'workerPoolSpecs[0].containerSpec.args[0]: 5 is a number; write it as text ("5")'),
], ids=["arg number", "env value number", "arg date", "arg yes", "arg binary", "machineSpec text", "top-level key",
        "key twice", "oneof", "null pool", "duration", "bool quoted", "int64 range", "rest labels", "sdk args"])
def test_a_value_of_the_wrong_kind_is_one_line_naming_its_full_path(capsys, tmp_path, text, message):
    job = tmp_path / "job.yaml"
    job.write_text(text)
    assert one_error_line(*vtrain_in_process(capsys, "validate", str(job))) == message


def test_unquoted_yaml_args_are_named_as_a_user_runs_vtrain(tmp_path):
    """Python's words ("expected string or bytes-like object, got 'int'") and a path without containerSpec and the
    index were what a user saw."""
    job = tmp_path / "job.yaml"
    job.write_text("workerPoolSpecs:\n" + POOL + "    args: [--epochs, 5]\n")
    for command in ("validate", "convert"):
        assert cli_error(command, str(job)) == \
            'workerPoolSpecs[0].containerSpec.args[1]: 5 is a number; write it as text ("5")'


@pytest.mark.parametrize("content", ["", "\n\n", "# only a comment\n", "null\n"], ids=["empty", "blank", "comment",
                                                                                       "null"])
def test_a_job_file_with_nothing_in_it_says_so(capsys, tmp_path, content):
    job = tmp_path / "job.yaml"
    job.write_text(content)
    for command in ("validate", "convert", "inspect"):
        assert one_error_line(*vtrain_in_process(capsys, command, str(job))) == \
            f"job file {job} is empty: it holds no JSON or YAML value"


# ---- arguments ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv,message", [
    (["validate"], "the following arguments are required: SPEC (see vtrain validate --help)"),
    (["inspect", "job.yaml", "--addresses", "moon"], "argument --addresses: invalid choice: 'moon'"),
    (["tune", "job.yaml", "--trials", "many"], "argument --trials: not a whole number: 'many'"),
    (["nonsense"], "argument COMMAND: invalid choice: 'nonsense'"),
])
def test_argument_mistakes_are_one_line(argv, message):
    assert message in cli_error(*argv)



def test_a_file_given_as_a_notebook_is_one_line(tmp_path):
    spec = write_spec(tmp_path / "job.yaml", [pool()])
    assert cli_error("notebook", "/bin/ls").startswith("NOTEBOOK: /bin/ls is not a Jupyter notebook (")
    assert cli_error("notebook", str(spec)).startswith(f"NOTEBOOK: {spec} is not a Jupyter notebook (")
    assert cli_error("notebook", str(write_file(tmp_path / "other.ipynb", {"cells": 3}))).startswith("NOTEBOOK: ")
    assert not (paths.data_dir() / "notebooks").exists()  # nothing ran


def test_a_job_dir_that_cannot_be_a_folder_is_one_line(tmp_path):
    spec = write_spec(tmp_path / "job.yaml", [pool()])
    a_file = write_file(tmp_path / "a-file", {})
    assert cli_error("run", str(spec), "--job-dir", str(a_file)) == f"--job-dir: {a_file} is a file, not a folder"
    assert cli_error("run", str(spec), "--job-dir", str(a_file / "below")).startswith(
        f"--job-dir: cannot make the folder {a_file / 'below'} (")
    assert not (paths.jobs_dir()).exists()  # no job was made


def test_the_logs_of_a_job_that_does_not_exist_are_an_error_not_nothing():
    assert cli_error("logs", "999") == "404 CustomJob 999 does not exist"


# ---- the magic says the same ----------------------------------------------------------------------------------------

def test_the_magic_says_the_same_about_its_config_file(ipython, capsys, tmp_path):
    laughs = tmp_path / "laughs.yaml"
    laughs.write_text(BILLION_LAUGHS)
    for path in (Path(sys.executable).resolve(), tmp_path, laughs):
        expected = one_error_line(*vtrain_in_process(capsys, "validate", str(path)))
        with pytest.raises(UsageError) as raised:
            ipython.run_cell_magic("vertex_train", f"--config {path} --dry-run", "print('never runs')")
        assert str(raised.value) == f"--config {path}: {expected}"  # the magic names its option, then says the same


# ---- bucket paths ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("job,field", [
    ({"workerPoolSpecs": [pool()], "baseOutputDirectory": {"outputUriPrefix": "gs://b/../../x"}},
     "baseOutputDirectory.outputUriPrefix"),
    ({"displayName": "j", "jobSpec": {"workerPoolSpecs": [pool()],
                                      "baseOutputDirectory": {"outputUriPrefix": "gs://b/out/../../../x"}}},
     "jobSpec.baseOutputDirectory.outputUriPrefix"),
    ({"worker_pool_specs": [pool(form="sdk")], "base_output_dir": "gs://b/.."}, "base_output_dir"),
    ({"workerPoolSpecs": [pool(containerSpec=None, pythonPackageSpec={
        "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest",
        "packageUris": ["gs://b/ok.tar.gz", "gs://b/../other-bucket/x.tar.gz"], "pythonModule": "trainer.task"})]},
     "workerPoolSpecs[0].pythonPackageSpec.packageUris[1]"),
    ({"trainingInput": {"scaleTier": "BASIC", "masterConfig": {"imageUri": "gcr.io/p/t:1"}, "jobDir": "gs://b/../x"}},
     "trainingInput.jobDir"),
], ids=["gcloud", "rest", "sdk", "packageUris", "legacy jobDir"])
def test_a_bucket_path_that_leaves_its_bucket_is_refused(capsys, tmp_path, job, field):
    message = one_error_line(*vtrain_in_process(capsys, "validate", str(write_file(tmp_path / "job.json", job))))
    assert message.startswith(f"{field}: ") and "leaves its bucket" in message


@pytest.mark.parametrize("char", ["\0", "\r", "\n", "\x1b"], ids=["NUL", "CR", "LF", "ESC"])
@pytest.mark.parametrize("job,field", [
    ({"workerPoolSpecs": [pool()], "baseOutputDirectory": {"outputUriPrefix": "gs://b/a{char}b"}},
     "baseOutputDirectory.outputUriPrefix"),
    ({"workerPoolSpecs": [pool(containerSpec=None, pythonPackageSpec={
        "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest",
        "packageUris": ["gs://b/ok.tar.gz", "gs://b/x{char}.tar.gz"], "pythonModule": "trainer.task"})]},
     "workerPoolSpecs[0].pythonPackageSpec.packageUris[1]"),
], ids=["outputUriPrefix", "packageUris"])
def test_a_bucket_path_with_a_control_character_is_refused(capsys, tmp_path, job, field, char):
    """Cloud Storage object names cannot hold CR or LF, and NUL is no name: refused when the job is read,
    not a traceback when a local run maps the path to a folder."""
    job = json.loads(json.dumps(job).replace("{char}", json.dumps(char)[1:-1]))
    message = one_error_line(*vtrain_in_process(capsys, "validate", str(write_file(tmp_path / "job.json", job))))
    assert message.startswith(f"{field}: ") and "control character" in message
    with pytest.raises(SpecError, match="control character"):
        paths.local_output_dir(f"gs://b/a{char}b", tmp_path)


def test_bucket_paths_are_normalised(capsys, tmp_path):
    path = write_spec(tmp_path / "job.json", [pool()], baseOutputDirectory={"outputUriPrefix": "gs://b/a/./b//../c/"})
    assert JobSpec.load(path).spec.base_output_directory.output_uri_prefix == "gs://b/a/c/"
    code, out, _ = vtrain_in_process(capsys, "inspect", str(path), "--json")
    assert code == 0 and json.loads(out)[0]["env"]["AIP_MODEL_DIR"] == "gs://b/a/c/model/"


def test_the_local_bucket_folder_is_never_left(tmp_path):
    root = paths.data_dir() / "gcs"
    local, note = paths.local_output_dir("gs://b/a/../c", tmp_path)
    assert local == f"{root / 'b' / 'c'}/" and note.endswith(f"{root / 'b' / 'c'}/")
    for uri in ("gs://b/../../x", "gs://../x", "gs://b/a/../../.."):
        with pytest.raises(SpecError):
            paths.local_output_dir(uri, tmp_path)
    (root / "b").mkdir(parents=True)
    (root / "b" / "out").symlink_to(tmp_path)  # a link made inside the bucket folder
    with pytest.raises(SpecError, match="leads outside the local bucket folder"):
        paths.local_output_dir("gs://b/out/x", tmp_path)
    with pytest.raises(SpecError, match="leaves its bucket"):
        staging.download("gs://b/../x.tar.gz", tmp_path, "packageUris[0]")


def test_the_magic_refuses_a_job_dir_that_leaves_its_bucket(ipython):
    with pytest.raises(UsageError, match=r"^--job-dir: 'gs://b/\.\./x' leaves its bucket"):
        ipython.run_cell_magic("vertex_train", "--job-dir gs://b/../x --dry-run", "print('never runs')")
