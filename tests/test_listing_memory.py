"""Listing a huge log keeps the local service small: a page of `entries:list` ends at about 10 MB
of entries (with a nextPageToken), however large the pageSize, and no entry is lost or repeated."""

from __future__ import annotations

import hashlib
import json
import urllib.request
from pathlib import Path
from typing import Any

from conftest import job_id, pool, wait_for

from jupyter_ext import paths
from jupyter_ext.runner.logs import MAX_LINE, now_rfc3339
from jupyter_ext.service import daemon

MB = 1024 * 1024
JOBS = "/v1/projects/local/locations/us-central1/customJobs"


def _call(endpoint: str, path: str, body: dict | None = None) -> Any:
    request = urllib.request.Request(endpoint + path, method="GET" if body is None else "POST",
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {daemon.read_token()}",
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def _peak_memory(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


def test_listing_a_300_mb_line_with_page_size_1000_keeps_the_service_small() -> None:
    info = daemon.ensure_running()
    endpoint = info["endpoint"]
    job = job_id(_call(endpoint, JOBS, {"displayName": "loud", "jobSpec": {"workerPoolSpecs": [
        pool(code="print('start')")]}})["name"])
    wait_for(lambda: _call(endpoint, f"{JOBS}/{job}")["state"] == "JOB_STATE_SUCCEEDED", 60, "the job to succeed")
    # then the rest of a 300 MB line, as the runner splits it: 1200 entries of 256 KB, written
    # straight into the job's log (much faster than through a replica's pipe)
    text = (bytes(range(48, 112)) * (MAX_LINE // 64)).decode()
    line = f"{now_rfc3339()} stdout {text}\n".encode()
    with open(paths.jobs_dir() / job / "logs" / "workerpool0-0.log", "ab") as log:
        log.writelines(line for _ in range(1200))

    listed, ids, sizes, token = hashlib.sha256(), [], [], ""
    while True:
        page = _call(endpoint, "/v2/entries:list", {"resourceNames": ["projects/local"], "pageSize": 1000,
                                                     "filter": f'resource.labels.job_id="{job}"', "pageToken": token})
        for entry in page["entries"]:
            listed.update(entry["textPayload"].encode())
            ids.append(entry["insertId"])
        sizes.append(sum(len(entry["textPayload"]) for entry in page["entries"]))
        if not (token := page.get("nextPageToken", "")):
            break

    peak = _peak_memory(info["pid"])
    assert peak < 200 * MB, f"the service peaked at {peak / MB:.0f} MB"
    assert max(sizes) <= 10 * MB and len(sizes) >= 30  # 300 MB: 30 pages or more
    assert len(ids) == len(set(ids)) == 1201  # every entry once
    expected = hashlib.sha256(b"start")
    for _ in range(1200):
        expected.update(text.encode())
    assert listed.hexdigest() == expected.hexdigest()  # all of it, in order
