"""The local service against hostile and mistaken requests (issue 15), through raw HTTP with the
service's token, the real SDK and the real CLI: each gets Google's error shape naming the field (never
a 500), and afterwards the service still answers a GET of another job and nothing was lost (that job,
its logs, the token). How fast it answers under load is measured by `benchmarks/bench_service.py`."""

from __future__ import annotations

import base64
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import job_id, pool, processes_of_job, vtrain, wait_for, write_spec
from google.api_core import exceptions as api_exceptions
from google.cloud import aiplatform
from google.cloud.aiplatform import hyperparameter_tuning as hpt

from jupyter_ext import limits, paths
from jupyter_ext.limits import Limits
from jupyter_ext.service import daemon
from jupyter_ext.service.emulation import Options
from jupyter_ext.service.queueing import JobQueue

JOBS = "/v1/projects/local/locations/us-central1/customJobs"
TUNING_JOBS = "/v1/projects/local/locations/us-central1/hyperparameterTuningJobs"
EQUALS_LINES = 200_000  # lines of 40 "=" for the regex and the heavy listing (about 3 s to list)


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path, fast_sdk_polling: None) -> Path:  # one service for the whole module
    return module_home


class Api:
    """Raw HTTP to a local service, with its token."""

    def __init__(self, endpoint: str, token: str) -> None:
        self.endpoint, self.token = endpoint, token

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
             timeout: float = 60) -> tuple[int, Any]:
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.endpoint + path, method=method, data=data, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def create(self, body: dict) -> str:
        status, answer = self.call("POST", JOBS, body)
        assert status == 200, answer
        return job_id(answer["name"])

    def job(self, job: str) -> dict:
        status, answer = self.call("GET", f"{JOBS}/{job}")
        assert status == 200, answer
        return answer

    def wait(self, job: str, state: str, timeout: float = 60) -> dict:
        return wait_for(lambda: (found := self.job(job))["state"] == state and found, timeout,
                        lambda: f"job {job} to be {state}; it is {self.job(job)['state']}", poll=0.1)

    def entries(self, body: Any = None, raw: bytes | None = None, timeout: float = 60) -> tuple[int, Any]:
        return self.call("POST", "/v2/entries:list", body, raw, timeout)

    def answered_during(self, job: str, requests: list[threading.Thread]) -> int:
        """How many GETs of `job` were answered while `requests` were still running (it waits for them).
        An event loop blocked by a request answers none before that request ends."""
        answered = 0
        while any(thread.is_alive() for thread in requests):
            self.job(job)
            answered += any(thread.is_alive() for thread in requests)
            time.sleep(0.1)
        return answered


def custom_job(name: str, *pools: dict) -> dict:
    return {"displayName": name, "jobSpec": {"workerPoolSpecs": list(pools)}}


def assert_google_error(status: int, answer: Any, code: int, *words: str) -> str:
    """A Google API error body (`{"error": {code, message, status}}`) whose message holds `words`."""
    assert status == code, answer
    error = answer["error"]
    assert error["code"] == code and error["status"] == "INVALID_ARGUMENT", error
    assert "\n" not in error["message"] and all(word in error["message"] for word in words), error["message"]
    return error["message"]


@dataclass
class Witness:
    """A finished job with its logs, and the service's token: what no hostile request may lose."""

    api: Api
    job: str
    lines: list[str]
    token: str

    def intact(self) -> None:
        assert self.api.job(self.job)["state"] == "JOB_STATE_SUCCEEDED"
        status, page = self.api.entries({"resourceNames": ["projects/local"], "pageSize": 100,
                                         "filter": f'resource.labels.job_id="{self.job}"'})
        assert status == 200 and [e["textPayload"] for e in page["entries"]] == self.lines
        assert daemon.read_token() == self.token
        status, listed = self.api.call("GET", JOBS + "?pageSize=1000")
        assert status == 200 and self.job in [job_id(j["name"]) for j in listed["customJobs"]]


@pytest.fixture(scope="module")
def api(service: dict) -> Api:
    return Api(service["endpoint"], daemon.read_token())


@pytest.fixture(scope="module")
def witness(api: Api) -> Witness:
    job = api.create(custom_job("witness", pool(code="for i in range(5): print(f'witness line {i}')")))
    api.wait(job, "JOB_STATE_SUCCEEDED")
    return Witness(api, job, [f"witness line {i}" for i in range(5)], daemon.read_token())


@pytest.fixture(scope="module")
def equals_job(api: Api) -> str:
    """A finished job whose log is EQUALS_LINES lines of 40 '='."""
    code = f"import sys\nsys.stdout.write(('=' * 40 + '\\n') * {EQUALS_LINES})"
    job = api.create(custom_job("equals", pool(code=code)))
    api.wait(job, "JOB_STATE_SUCCEEDED", timeout=120)
    return job


# ---------------------------------------------------------------- entries:list

@pytest.mark.parametrize("body, words", [
    ({"pageSize": "abc"}, ["pageSize", "'abc'"]),
    ([], ["JSON object"]),
    ({"filter": 5}, ["filter: must be a string"]),
    ({"resourceNames": [1]}, ["resourceNames[0]: must be a string"]),
    ({"filter": "(" * 3000}, ["filter:", "nested more than 64 levels"]),
    ({"filter": "textPayload:x " * 1500}, ["filter: 21000 characters, at most 20000"]),
    ({"filter": "NOT " * 3000 + "x"}, ["nested more than 64 levels"]),
    ({"pageSize": -1}, ["pageSize"]),
    ({"pageSize": True}, ["pageSize"]),
    ({"pageSize": 2**40}, ["pageSize"]),
    ({"resourceNames": ["folders/1"]}, ["resourceNames[0]", "projects/PROJECT_ID"]),
    ({"resourceNames": "projects/local"}, ["resourceNames: must be an array"]),
    ({"orderBy": "severity desc"}, ["orderBy"]),
    ({"orderBy": ["timestamp"]}, ["orderBy: must be a string"]),
    ({"pageToken": "not-a-token"}, ["pageToken"]),
    ({"pageToken": base64.urlsafe_b64encode(b"[" * 50_000).decode()}, ["pageToken"]),
    ({"filter": 'textPayload=~"(?<=a)b"'}, ["bad regular expression"]),
    ({"filter": 'textPayload=~"\ud800"'}, ["bad regular expression"]),
    ({"filter": "severity>=" + "9" * 5000}, ["unknown severity"]),
    ({"filter": 'timestamp>="yesterday"'}, ["RFC 3339"]),
    ({"projectId": "local"}, ['Unknown name "projectId"']),
])
def test_entries_list_refuses_what_it_cannot_take(witness: Witness, body: Any, words: list[str]) -> None:
    status, answer = witness.api.entries(body)
    assert_google_error(status, answer, 400, *words)
    witness.intact()


@pytest.mark.parametrize("raw, words", [
    (b"{", ["invalid JSON body"]),
    (b"\xff\xfe{}", ["invalid JSON body"]),
    (b"[" * 200_000, ["invalid JSON body"]),
    (b'"projects/local"', ["JSON object"]),
])
def test_entries_list_refuses_bodies_that_are_not_json_objects(witness: Witness, raw: bytes,
                                                               words: list[str]) -> None:
    status, answer = witness.api.entries(raw=raw)
    assert_google_error(status, answer, 400, *words)
    witness.intact()


def test_an_oversized_body_is_413_and_read_to_its_end(witness: Witness) -> None:
    padding = b" " * (11 * 2**20)  # over the 10 MiB Google's front ends take
    for path in ("/v2/entries:list", JOBS):
        status, answer = witness.api.call("POST", path, raw=b"{" + padding + b"}")
        assert status == 413 and answer["error"]["code"] == 413, answer
        assert "Request payload size exceeds the limit: 10485760 bytes." == answer["error"]["message"]
    witness.intact()


def test_a_backtracking_regex_answers_quickly_and_blocks_no_other_request(witness: Witness, equals_job: str) -> None:
    """`(=+)+x` over lines of 40 "=" backtracks for ever in Python's re; RE2 is linear. While the filter
    runs over every line, GETs of another job keep being answered."""
    answered: dict[str, Any] = {}

    def listing() -> None:
        body = {"resourceNames": ["projects/local"], "pageSize": 10,
                "filter": f'resource.labels.job_id="{equals_job}" textPayload=~"(=+)+x"'}
        pages = [witness.api.entries(body, timeout=120)]
        while pages[-1][0] == 200 and (token := pages[-1][1].get("nextPageToken")):  # partial pages
            pages.append(witness.api.entries({**body, "pageToken": token}, timeout=120))
        answered["pages"] = pages

    started = time.monotonic()
    thread = threading.Thread(target=listing)
    thread.start()
    answered_during = witness.api.answered_during(witness.job, [thread])
    thread.join()
    took = time.monotonic() - started
    assert all(status == 200 and page.get("entries", []) == [] for status, page in answered["pages"])  # no x
    assert took < 60, f"the regex filter took {took:.1f} s"
    assert answered_during >= 3, "the listing blocked other requests, or ended before it could be shown not to"
    # the same engine finds what is there
    status, page = witness.api.entries({"resourceNames": ["projects/local"], "pageSize": 3,
                                        "filter": f'resource.labels.job_id="{equals_job}" textPayload=~"^(=+)+$"'})
    assert status == 200 and [e["textPayload"] for e in page["entries"]] == ["=" * 40] * 3
    witness.intact()


def test_heavy_listings_leave_the_event_loop_free(witness: Witness, equals_job: str) -> None:
    """Two unpinned listings at once (as many as the log pool's threads) over every line of every job."""
    threads = [threading.Thread(target=witness.api.entries, args=({"filter": 'textPayload:"nothing like this"'},),
                                kwargs={"timeout": 120}) for _ in range(2)]
    for thread in threads:
        thread.start()
    assert witness.api.answered_during(witness.job, threads) >= 3
    witness.intact()


# ---------------------------------------------------------------- job bodies and query parameters

@pytest.mark.parametrize("path, raw, words", [
    (JOBS, b"[]", ["invalid JSON body"]),
    (JOBS, b"{", ["invalid JSON body"]),
    (JOBS, b"\xff", ["invalid JSON body"]),
    (JOBS, b"[" * 200_000, ["invalid JSON body"]),
    (JOBS, b'{"jobSpec": 5}', ["jobSpec: "]),
    (JOBS, b'{"jobSpec": {"workerPoolSpecs": [{"nope": 1}]}}', ['Unknown name "nope"', "jobSpec.workerPoolSpecs[0]"]),
    (JOBS, b'{"displayName": "x", "jobSpec": {"scheduling": {"timeout": "forever"}}}', ["jobSpec.scheduling.timeout: "]),
    (JOBS, b'{"displayName": "x", "jobSpec": {"workerPoolSpecs": [{"replicaCount": "abc"}]}}',
     ["replicaCount"]),
    (JOBS, b'{"displayName": "x", "jobSpec": {"workerPoolSpecs": [{"replicaCount": 1e400}]}}', ["replicaCount"]),
    (JOBS, b'{"displayName": "x", "surprise": 1}', ["surprise"]),
    (JOBS, b'{"displayName": "x", "jobSpec": {"workerPoolSpecs": [{"machineSpec": {"acceleratorType": 99}}]}}',
     ["jobSpec.workerPoolSpecs[0].machineSpec.acceleratorType: invalid value 99 (valid: NVIDIA_TESLA_K80"]),
    (JOBS, b'{"displayName": "x", "jobSpec": {"scheduling": {"strategy": 42}}}',
     ["jobSpec.scheduling.strategy: invalid value 42"]),
    (JOBS, b'{"displayName": "x", "jobSpec": {"workerPoolSpecs": []}}', ["workerPoolSpecs"]),
    (TUNING_JOBS, b'{"maxTrialCount": "many"}', ["maxTrialCount"]),
    (TUNING_JOBS, b'{"studySpec": []}', ["studySpec"]),
    (TUNING_JOBS, b"{}", ["maxTrialCount"]),
])
def test_bad_job_bodies_are_400_naming_the_field(witness: Witness, path: str, raw: bytes, words: list[str]) -> None:
    before = witness.api.call("GET", path + "?pageSize=1000")[1]
    status, answer = witness.api.call("POST", path, raw=raw)
    assert_google_error(status, answer, 400, *words)
    assert witness.api.call("GET", path + "?pageSize=1000")[1] == before  # nothing was created
    witness.intact()


@pytest.mark.parametrize("query, words", [
    ("pageSize=abc", ["pageSize"]),
    ("pageSize=%C2%B2", ["pageSize"]),  # a superscript 2: a digit to str.isdigit, not to int()
    ("pageSize=99999999999999999999", ["pageSize"]),
    ("pageToken=%25%25%25", ["pageToken"]),
    ("pageToken=" + base64.urlsafe_b64encode(b"[" * 30_000).decode(), ["pageToken"]),
    ("filter=state%3DJOB_STATE_NOPE", ["unknown state"]),
    ("filter=" + "x" * 5000, ["filter: cannot read"]),
])
def test_bad_query_parameters_are_400(witness: Witness, query: str, words: list[str]) -> None:
    status, answer = witness.api.call("GET", f"{JOBS}?{query}")
    message = assert_google_error(status, answer, 400, *words)
    assert len(message) < 600
    witness.intact()


# ---------------------------------------------------------------- local limits

@pytest.mark.parametrize("header", [
    base64.urlsafe_b64encode(b"[" * 40_000).decode(),  # nesting beyond json's recursion limit
    base64.urlsafe_b64encode(b'{"python": 1, "path": 2, "env": 3}').decode(),
    "not base64 at all \u00e9",
    base64.urlsafe_b64encode(b'{"python": "relative/python", "path": [], "env": {}}').decode(),
], ids=["deep", "wrong-types", "not-base64", "relative-python"])
def test_a_malformed_client_header_runs_the_job_with_the_services_python(witness: Witness, header: str) -> None:
    """The x-vtrain-client header (the submitting client's Python) is the client's to send: a malformed
    one is ignored, never a 500."""
    request = urllib.request.Request(witness.api.endpoint + JOBS, method="POST", headers={
        "Authorization": f"Bearer {witness.api.token}", "Content-Type": "application/json",
        "x-vtrain-client": header.encode("utf-8").decode("latin-1")},
        data=json.dumps(custom_job("header", pool(code="print('ran')"))).encode())
    with urllib.request.urlopen(request, timeout=60) as response:
        created = json.loads(response.read())
    assert witness.api.wait(job_id(created["name"]), "JOB_STATE_SUCCEEDED")
    witness.intact()


def test_replica_count_5000_is_refused_naming_the_pool_and_the_limit(witness: Witness, tmp_path: Path) -> None:
    """replicaCount "5000" for 5 (proto3 JSON takes an int64 as a string): refused before anything starts."""
    limit = Limits().replicas_per_job
    body = custom_job("typo", pool(code="pass"), pool("5000", code="import time; time.sleep(60)"))
    before = witness.api.call("GET", JOBS + "?pageSize=1000")[1]
    started = time.monotonic()
    status, answer = witness.api.call("POST", JOBS, body)
    message = assert_google_error(status, answer, 400, "workerPoolSpecs[1].replicaCount: 5000 makes 5001 replicas",
                                  f"local limit of {limit} per job", f"{limits.cores()}",
                                  "vtrain service start --max-replicas N")
    assert time.monotonic() - started < 5
    assert witness.api.call("GET", JOBS + "?pageSize=1000")[1] == before
    # the real CLI says the same in one line
    done = vtrain("submit", str(write_spec(tmp_path / "typo.yaml", body["jobSpec"]["workerPoolSpecs"])))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("vtrain: error: ") and message in done.stderr
    witness.intact()


def test_max_trial_count_2e9_is_refused_fast_without_growing_the_service(witness: Witness, service: dict) -> None:
    rss_before = _rss(service["pid"])
    custom = aiplatform.CustomJob(display_name="huge-study", worker_pool_specs=[pool(code="pass", form="sdk")])
    job = aiplatform.HyperparameterTuningJob(display_name="huge-study", custom_job=custom,
                                             metric_spec={"accuracy": "maximize"},
                                             parameter_spec={"lr": hpt.DoubleParameterSpec(min=1e-4, max=1e-1,
                                                                                           scale="log")},
                                             max_trial_count=2_000_000_000, parallel_trial_count=1)
    started = time.monotonic()
    with pytest.raises(api_exceptions.BadRequest,
                       match=rf"maxTrialCount: 2000000000 trials, more than the local limit of {Limits().max_trials}"):
        job.run()
    assert time.monotonic() - started < 10
    assert _rss(service["pid"]) - rss_before < 50 * 2**20
    witness.intact()


def test_the_trials_of_a_huge_study_are_made_one_at_a_time() -> None:
    """Were the limit raised, nothing would list 2e9 trials: the search yields them as asked."""
    from google.cloud.aiplatform_v1 import types as v1

    from jupyter_ext import tuning

    study = v1.StudySpec(parameters=[{"parameter_id": "lr", "double_value_spec": {"min_value": 0.1, "max_value": 1}}],
                         algorithm=v1.StudySpec.Algorithm.GRID_SEARCH)
    for algorithm in (v1.StudySpec.Algorithm.GRID_SEARCH, v1.StudySpec.Algorithm.RANDOM_SEARCH):
        study.algorithm = algorithm
        trials = tuning.suggestions(study, 2_000_000_000, seed="x")
        assert [0.1 <= next(trials)["lr"] <= 1 for _ in range(3)] == [True] * 3


@contextmanager
def own_service(home: Path, monkeypatch: pytest.MonkeyPatch, options: Options | None = None) -> Iterator[Api]:
    """A service of its own (its own data folder and limits), stopped afterwards."""
    monkeypatch.setenv("VTRAIN_HOME", str(home))
    info = daemon.ensure_running(options)
    try:
        yield Api(info["endpoint"], daemon.read_token())
    finally:
        daemon.stop()


def _waits_for(path: Path) -> str:
    """A replica's code: wait until `path` exists, then end well."""
    return f"import os, time\nwhile not os.path.exists({str(path)!r}): time.sleep(0.05)"


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def test_jobs_beyond_the_running_limit_wait_queued_then_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release = tmp_path / "release"
    with own_service(tmp_path / "home", monkeypatch, Options(limits=Limits(max_running_jobs=1))) as api:
        first = api.create(custom_job("first", pool(code=_waits_for(release))))
        api.wait(first, "JOB_STATE_RUNNING")
        second = api.create(custom_job("second", pool(code="print('second ran')")))
        third = api.create(custom_job("third", pool(code="print('third ran')")))
        time.sleep(1.0)  # time enough to start, were the queue not holding them
        assert [api.job(j)["state"] for j in (second, third)] == ["JOB_STATE_QUEUED"] * 2
        assert processes_of_job(second) == [] and processes_of_job(third) == []
        status, _ = api.call("POST", f"{JOBS}/{third}:cancel", {})
        assert status == 200
        cancelled = api.job(third)
        assert cancelled["state"] == "JOB_STATE_CANCELLED" and cancelled["error"]["code"] == 1
        assert "startTime" not in cancelled
        release.touch()
        done = api.wait(second, "JOB_STATE_SUCCEEDED")
        assert api.job(first)["state"] == "JOB_STATE_SUCCEEDED"
        assert _when(done["startTime"]) >= _when(api.job(first)["endTime"])  # it waited for the first one's slot
        status, page = api.entries({"filter": 'textPayload:"ran"'})
        assert status == 200 and [e["textPayload"] for e in page["entries"]] == ["second ran"]
        # a tuning job is queued like any job (and cancelled while queued just as well)
        api.create(custom_job("holder", pool(code=_waits_for(tmp_path / "release2"))))
        status, tuning_job = api.call("POST", TUNING_JOBS, {
            "displayName": "queued-study", "maxTrialCount": 2, "parallelTrialCount": 1,
            "studySpec": {"metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
                          "parameters": [{"parameterId": "lr", "doubleValueSpec": {"minValue": 0.1, "maxValue": 1}}]},
            "trialJobSpec": {"workerPoolSpecs": [pool(code="pass")]}})
        assert status == 200 and tuning_job["state"] == "JOB_STATE_QUEUED"
        status, _ = api.call("POST", f"{TUNING_JOBS}/{job_id(tuning_job['name'])}:cancel", {})
        assert status == 200
        assert api.call("GET", f"{TUNING_JOBS}/{job_id(tuning_job['name'])}")[1]["state"] == "JOB_STATE_CANCELLED"
        (tmp_path / "release2").touch()


def test_the_queue_counts_replicas_and_keeps_creation_order() -> None:
    """Without threads or timing: which jobs the queue starts, as jobs end."""
    started: list[str] = []
    queue = JobQueue(Limits(max_replicas=4, max_running_jobs=3))
    for job, replicas in (("a", 2), ("b", 2), ("c", 1), ("d", 3), ("e", 1)):
        queue.submit(job, replicas, lambda job=job: started.append(job))
    assert started == ["a", "b"]  # c would be a third job, but 4 replicas are taken
    assert queue.withdraw("c") and not queue.withdraw("c") and not queue.withdraw("a")
    queue.done("a")
    assert started == ["a", "b"]  # d (3 replicas) does not fit beside b; e waits behind it
    queue.done("b")
    assert started == ["a", "b", "d", "e"]


# ---------------------------------------------------------------- one service, its store, its files

def test_a_second_service_start_says_already_running_and_changes_nothing(
        witness: Witness, service: dict, api: Api, tmp_path: Path) -> None:
    release = tmp_path / "release"
    running = api.create(custom_job("running-through-a-second-start", pool(code=_waits_for(release))))
    api.wait(running, "JOB_STATE_RUNNING")
    replicas = processes_of_job(running)
    runtime = daemon.runtime_dir()
    before = {name: (runtime / name).read_bytes() for name in ("token", "service.json")}
    done = subprocess.run([sys.executable, "-m", "jupyter_ext.service"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 1
    assert done.stderr == f"already running (pid {service['pid']}, endpoint {service['endpoint']})\n"
    assert {name: (runtime / name).read_bytes() for name in before} == before
    assert (daemon.status() or {}).get("pid") == service["pid"]
    status = json.loads(vtrain("service", "status", "--json").stdout)
    assert status["pid"] == service["pid"] and status["limits"] == json.loads(before["service.json"])["limits"]
    # no recovery ran: the running job and its replicas were left alone, and it ends as it would have
    assert api.job(running)["state"] == "JOB_STATE_RUNNING" and processes_of_job(running) == replicas != []
    release.touch()
    api.wait(running, "JOB_STATE_SUCCEEDED")
    witness.intact()


def test_a_state_change_that_cannot_be_saved_fails_the_job_and_the_next_start_reconciles(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    with own_service(home, monkeypatch) as api:
        database = sqlite3.connect(home / "jobs.sqlite")
        database.execute("CREATE TRIGGER full_disk BEFORE UPDATE ON jobs "
                         "BEGIN SELECT RAISE(ABORT, 'database or disk is full (injected)'); END")
        database.commit()
        job = api.create(custom_job("unsaved", pool(code="import time; time.sleep(120)"),
                                    pool(code="import time; time.sleep(120)")))
        failed = api.wait(job, "JOB_STATE_FAILED", timeout=30)
        assert "could not save the job's state" in failed["error"]["message"]
        assert "database or disk is full (injected)" in failed["error"]["message"]
        wait_for(lambda: processes_of_job(job) == [], 10, "the job's replicas to stop")
        os.kill(daemon.status()["pid"], signal.SIGKILL)  # type: ignore[index]  # a crash: the store says QUEUED
        wait_for(lambda: daemon.status() is None, 10, "the killed service to be gone")
        database.execute("DROP TRIGGER full_disk")
        database.commit()
        database.close()
    with own_service(home, monkeypatch) as api:
        again = api.job(job)
        assert again["state"] == "JOB_STATE_FAILED" and again["error"]["code"] == 13
        assert "could not save the job's state" in again["error"]["message"]


def test_deleting_a_job_deletes_its_files(witness: Witness) -> None:
    job = aiplatform.CustomJob(display_name="to-delete", worker_pool_specs=[
        pool(code="print('soon gone')", form="sdk")])
    job.run()
    deleted = job_id(job.resource_name)
    folder = paths.jobs_dir() / deleted
    assert (folder / "logs" / "workerpool0-0.log").is_file()
    job.delete()
    assert not folder.exists()
    status, answer = witness.api.call("GET", f"{JOBS}/{deleted}")
    assert status == 404 and answer["error"]["status"] == "NOT_FOUND"
    status, page = witness.api.entries({"filter": f'resource.labels.job_id="{deleted}"'})
    assert status == 200 and page == {"entries": []}
    witness.intact()


def _rss(pid: int) -> int:
    """Resident memory of a process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")
