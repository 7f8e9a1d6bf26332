"""Property-based tests (hypothesis) over the local service's inputs: whatever filter a client
sends, the Logging query parser answers a tree or its own FilterError (which the handler answers
as 400), and every later step over that tree (matching, what it pins, its time bounds, a listing)
answers or raises that error alone; whatever JSON a client posts to customJobs,
hyperparameterTuningJobs or entries:list, the answer is never a 5xx, and the service still
answers afterwards.

Runs are bounded (max_examples) and, under CI, derandomized, so the suite is deterministic there.
Posted job bodies never hold a `command`: a body that happens to be valid runs nothing but a
replica that the process backend refuses to start, or `python -c pass`.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import job_id, pool, wait_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_ext.errors import FilterError
from jupyter_ext.service import daemon
from jupyter_ext.service.logs import line_to_entry, list_entries
from jupyter_ext.service.logs.query import parse_tree, pins, predicate, time_bound

FUZZ = settings(max_examples=200, deadline=None, derandomize=os.environ.get("CI") == "true", database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
JOBS = "/v1/projects/local/locations/us-central1/customJobs"
TUNING_JOBS = "/v1/projects/local/locations/us-central1/hyperparameterTuningJobs"


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path) -> Path:  # one service for the whole module
    return module_home


# ---------------------------------------------------------------- the filter language

FIELDS = st.sampled_from([
    "resource.type", "resource.labels.job_id", "resource.labels.task_name", 'labels."ml.googleapis.com/task_name"',
    'labels."ml.googleapis.com/trial_id"', "labels.task_name", "textPayload", "jsonPayload.step", "jsonPayload.a.b",
    "severity", "timestamp", "receiveTimestamp", "insertId", "logName", "nested.list", '"quoted"', "a.b.c"])
OPS = st.sampled_from(["=", "!=", "<", "<=", ">", ">=", ":", "=~", "!~"])
VALUES = st.one_of(
    st.sampled_from(["ml_job", "workerpool0-0", "123", "-5", "1e309", "9" * 30, "*", "INFO", "error", "DEFAULT", "800",
                     "2026-01-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-01-01 10:00:00.123+02:00", "0000-01-01",
                     '"(=+)+x"', '"^h.l+o$"', '"(?i)HELLO"', '"(?<=a)b"', '"[a-"', '"\\\\d+"', '"a{1001}"',
                     '"\\u0041"', '"\\u00"', '"unterminated', '""', "true", "null"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12).map(json.dumps),
    st.from_regex(r"[A-Za-z0-9_.\-/]{1,12}", fullmatch=True))
TOKENS = st.one_of(
    st.tuples(FIELDS, OPS, VALUES).map("".join),
    st.tuples(FIELDS, OPS, VALUES).map(" ".join),
    st.tuples(FIELDS, OPS, st.lists(VALUES, min_size=1, max_size=3).map(lambda v: "(" + " OR ".join(v) + ")"))
    .map("".join),
    VALUES, FIELDS, OPS,
    st.sampled_from(["AND", "OR", "NOT", "-", "(", ")", "((", "))", "and", '"', "\\", "\t", "\n"]))
FILTERS = st.one_of(
    st.lists(TOKENS, max_size=25).map(" ".join),
    st.lists(TOKENS, max_size=25).map("".join),
    st.text(max_size=300),
    st.integers(0, 200).map(lambda n: "(" * n + "x" + ")" * n),
    st.integers(0, 200).map(lambda n: "NOT " * n + "x"))

ENTRY_PAYLOADS = [
    "hello", "", "{\"step\": 3, \"a\": {\"b\": [1, \"two\", null]}, \"severity\": \"warning\"}", "[" * 50 + "]" * 50,
    "{" + "\"a\":{" * 70 + "}" * 71, "=" * 40, "Traceback (most recent call last):", "\ud800 lone surrogate",
]


def _entries() -> list[dict]:
    from jupyter_ext.runner.logs import LogLine

    return [line_to_entry("123", "local", task, n, LogLine(f"2026-01-01T00:00:0{n % 10}.000001Z", stream, text),
                          trial)
            for n, (task, stream, text, trial) in enumerate(
                (task, stream, text, trial) for task in ("workerpool0-0", "workerpool1-1")
                for stream in ("stdout", "stderr") for text in ENTRY_PAYLOADS for trial in (None, "2"))]


ENTRIES = _entries()


@pytest.fixture(scope="module")
def logs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two jobs' replica logs, one with a trial, in the runner's format."""
    root = tmp_path_factory.mktemp("fuzz-logs")
    for job, trial in (("123", None), ("456", "2")):
        logs = root / job / ("trials/" + trial if trial else "") / "logs"
        logs.mkdir(parents=True)
        for task in ("workerpool0-0", "workerpool1-0"):
            text = "".join(f"2026-01-01T00:00:{n:02d}.000001Z {'stderr' if n % 3 else 'stdout'} "
                           f"{ENTRY_PAYLOADS[n % 7]}\n" for n in range(40))
            (logs / f"{task}.log").write_text(text)
    return root


def _sources(root: Path) -> list[tuple[str, str, Path, str | None]]:
    return [("123", "local", root / "123", None), ("456", "local", root / "456" / "trials" / "2", "2")]


@FUZZ
@given(text=FILTERS)
def test_no_filter_raises_anything_but_a_filter_error(text: str) -> None:
    try:
        tree = parse_tree(text)
    except FilterError as exc:
        assert "\n" not in str(exc)
        return
    try:
        test = predicate(tree)
    except FilterError:  # a value the comparison cannot use (a bad regex, time or severity)
        return
    for entry in ENTRIES:
        assert test(entry) in (True, False)
    pins(tree, ["resource.labels.job_id", "resource.labels.task_name"])
    time_bound(tree, lower=True)
    time_bound(tree, lower=False)


@FUZZ
@given(text=FILTERS, order=st.sampled_from(["timestamp asc", "timestamp desc", "", "severity"]),
       size=st.integers(-5, 2000), token=st.sampled_from(["", "e30", "not a token", "eyJvIjoiYXNjIiwicCI6e319"]))
def test_a_listing_answers_a_page_or_a_filter_error(logs_root: Path, text: str, order: str, size: int,
                                                    token: str) -> None:
    try:
        page = list_entries(_sources(logs_root), filter_text=text, order_by=order, page_size=size, page_token=token)
    except FilterError as exc:
        assert "\n" not in str(exc)
        return
    assert set(page) <= {"entries", "nextPageToken"} and isinstance(page["entries"], list)
    json.dumps(page)  # what the handler sends


# ---------------------------------------------------------------- REST bodies

SCALARS = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
           | st.sampled_from(["", "0", "1", "-1", "5000", "1e400", "abc", "n1-standard-4", "JOB_STATE_RUNNING",
                              "projects/local", "projects/", "folders/1", "timestamp desc", "3600s", "forever",
                              "gcr.io/p/t:1", "2026-01-01T00:00:00Z", 'textPayload=~"(=+)+x"', "(" * 100]))
JOB_FIELDS = st.sampled_from([
    "displayName", "jobSpec", "workerPoolSpecs", "machineSpec", "machineType", "acceleratorType", "acceleratorCount",
    "replicaCount", "containerSpec", "imageUri", "env", "name", "value", "pythonPackageSpec", "executorImageUri",
    "pythonModule", "diskSpec", "bootDiskSizeGb", "baseOutputDirectory", "outputUriPrefix", "scheduling", "timeout",
    "restartJobOnWorkerRestart", "labels", "encryptionSpec", "state", "createTime", "error", "studySpec", "metrics",
    "metricId", "goal", "parameters", "parameterId", "doubleValueSpec", "minValue", "maxValue", "trialJobSpec",
    "maxTrialCount", "parallelTrialCount", "maxFailedTrialCount", "algorithm", "nonsense",
    "resourceNames", "projectIds", "filter", "orderBy", "pageSize", "pageToken"])
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8) | JOB_FIELDS, children,
                                                                      max_size=5),
    max_leaves=30)
FIELD_SHAPED = st.recursive(
    SCALARS, lambda children: st.lists(children, max_size=4) | st.dictionaries(JOB_FIELDS, children, max_size=6),
    max_leaves=40)


def _runnable(replicas: Any = 1) -> dict:
    return pool(replicas, code="pass")


MUTABLE_JOB = {"displayName": "fuzz", "jobSpec": {"workerPoolSpecs": [_runnable(), _runnable()]}}
PATHS = [("displayName",), ("jobSpec",), ("jobSpec", "workerPoolSpecs"), ("jobSpec", "workerPoolSpecs", 1),
         ("jobSpec", "workerPoolSpecs", 1, "replicaCount"), ("jobSpec", "workerPoolSpecs", 0, "machineSpec"),
         ("jobSpec", "workerPoolSpecs", 1, "machineSpec", "machineType"), ("jobSpec", "scheduling"),
         ("jobSpec", "baseOutputDirectory"), ("labels",), ("jobSpec", "workerPoolSpecs", 1, "containerSpec", "env")]


def _replaced(body: dict, path: tuple, value: Any) -> dict:
    body = json.loads(json.dumps(body))
    target = body
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return body


def _without_commands(value: Any) -> Any:
    """The value with no `command` anywhere (see the module notes)."""
    if isinstance(value, dict):
        return {k: _without_commands(v) for k, v in value.items() if k not in ("command", "args", "packageUris")}
    if isinstance(value, list):
        return [_without_commands(v) for v in value]
    return value


JOB_BODIES = st.one_of(
    JSON_VALUES.map(_without_commands),
    FIELD_SHAPED.map(_without_commands),
    st.builds(lambda path, value: _replaced(MUTABLE_JOB, path, _without_commands(value)), st.sampled_from(PATHS),
              FIELD_SHAPED))
ENTRIES_BODIES = st.one_of(
    JSON_VALUES,
    st.dictionaries(st.sampled_from(["resourceNames", "projectIds", "filter", "orderBy", "pageSize", "pageToken"]),
                    FIELD_SHAPED | FILTERS, max_size=5))


class Client:
    def __init__(self, endpoint: str) -> None:
        self.endpoint, self.token = endpoint, daemon.read_token()

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8", "surrogatepass")
        request = urllib.request.Request(self.endpoint + path, method="POST", data=data,
                                         headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def get(self, path: str) -> dict:
        request = urllib.request.Request(self.endpoint + path, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as response:  # still answers
            return json.loads(response.read())


@pytest.fixture(scope="module")
def client(service: dict) -> Client:
    return Client(service["endpoint"])


@pytest.fixture(scope="module")
def witness(client: Client) -> str:
    """A finished job: the service must still answer for it after any body."""
    status, job = client.post(JOBS, {"displayName": "witness", "jobSpec": {"workerPoolSpecs": [_runnable()]}})
    assert status == 200, job
    found = job_id(job["name"])
    wait_for(lambda: client.get(f"{JOBS}/{found}")["state"] == "JOB_STATE_SUCCEEDED", 60, "the witness job to end")
    return found


def _never_5xx(status: int, answer: Any) -> None:
    assert status < 500, answer
    if status >= 400:
        error = answer["error"]
        assert error["code"] == status and isinstance(error["message"], str) and error["status"], answer


def _still_answers(client: Client, witness: str) -> None:
    assert client.get(f"{JOBS}/{witness}")["state"] == "JOB_STATE_SUCCEEDED"
    listed = client.get(JOBS + "?pageSize=1000")["customJobs"]
    assert witness in [job_id(job["name"]) for job in listed]


@pytest.mark.parametrize("path, bodies", [(JOBS, JOB_BODIES), (TUNING_JOBS, JOB_BODIES),
                                          ("/v2/entries:list", ENTRIES_BODIES)],
                         ids=["customJobs", "hyperparameterTuningJobs", "entries:list"])
def test_request_bodies_never_get_a_5xx(path: str, bodies: Any, client: Client, witness: str) -> None:
    @FUZZ
    @given(body=bodies)
    def post(body: Any) -> None:
        _never_5xx(*client.post(path, body))
    post()
    _still_answers(client, witness)


def test_raw_bytes_never_get_a_5xx(client: Client, witness: str) -> None:
    @FUZZ
    @given(body=st.binary(max_size=200))
    def post(body: bytes) -> None:
        for path in (JOBS, TUNING_JOBS, "/v2/entries:list"):
            _never_5xx(*client.post(path, body))
    post()
    _still_answers(client, witness)
