"""The status code the local service gives a failed CustomJob comes from how it failed, not from
words its replicas printed."""

from __future__ import annotations

from conftest import pool
from jupyter_ext import launch

DEADLINE_EXCEEDED, INVALID_ARGUMENT = 4, 3  # google.rpc.Code, as Vertex AI reports them


def test_deadline_exceeded_only_for_a_job_past_its_timeout() -> None:
    slow = launch.submit({"displayName": "past-timeout", "jobSpec": {
        "workerPoolSpecs": [pool(code="import time; time.sleep(60)")], "scheduling": {"timeout": "1s"}}})
    talks = launch.submit({"displayName": "says-timeout", "jobSpec": {"workerPoolSpecs": [pool(
        code="import sys; print('scheduling.timeout: none set, running to the end'); sys.exit(3)")]}})
    assert slow.wait(60) == talks.wait(60) == "JOB_STATE_FAILED"
    assert (slow.resource.error.code, slow.error) == (DEADLINE_EXCEEDED,
                                                      "the job ran longer than its scheduling.timeout of 1s")
    assert talks.resource.error.code == INVALID_ARGUMENT
    assert str(talks.failure()).endswith("FAILED: replica workerpool0-0 exited with code 3; its log: "
                                         f"{talks.local_dir / 'logs' / 'workerpool0-0.log'}")
