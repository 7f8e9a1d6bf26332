"""A job's folder holds whatever its replicas wrote, at any depth: the workbench measures and removes it
without recursion (Python's `shutil.rmtree` raises RecursionError past about 1,000 nested folders), never
follows a symbolic link out of it, and says what it could not remove instead of failing with a traceback
or a 500. `vtrain gc` on such a folder is tested in test_gc.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import job_id, pool
from google.api_core import exceptions as api_exceptions
from google.cloud import aiplatform

from jupyter_ext import paths

LEVELS = 1500  # nested folders: past Python's recursion limit


def deep_output(levels: int = LEVELS, name: str = "a") -> str:
    """A replica's code that writes a file under `levels` nested folders in `deep/` of the folder it
    starts in (the service starts replicas in the job's folder)."""
    return (f"import os\nos.mkdir('deep')\nos.chdir('deep')\nfor _ in range({levels}):\n"
            f"    os.mkdir({name!r})\n    os.chdir({name!r})\nopen('weights', 'w').write('x' * 1000)\n")


def make_deep(root: Path, levels: int = LEVELS, name: str = "a") -> None:
    """`levels` nested folders under `root` with a file at the bottom, made the way a replica can (relative
    names, so that the whole path may exceed the system's limit)."""
    here = os.getcwd()
    root.mkdir(parents=True, exist_ok=True)
    os.chdir(root)
    try:
        for _ in range(levels):
            os.mkdir(name)
            os.chdir(name)
        Path("weights").write_bytes(b"x" * 1000)
    finally:
        os.chdir(here)


@pytest.fixture(autouse=True)
def _workbench_home(module_home: Path, fast_sdk_polling: None) -> Path:  # one service for the whole module
    return module_home


def test_a_deep_tree_is_measured_and_removed_without_following_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the job's")
    tree = tmp_path / "job"
    make_deep(tree / "output")
    (tree / "to-folder").symlink_to(outside)
    (tree / "to-file").symlink_to(outside / "keep.txt")
    found = list(paths.walk_tree(tree))
    assert len(found) == 1 + 1 + LEVELS + 1 + 2  # the job, output, the nested folders, the file, the links
    assert found[0][0] == tree and all(tree in path.parents for path, _ in found[1:])
    assert sum(1 for path, _ in found if path.name == "weights") == 1  # nothing seen twice, nothing through a link
    assert paths.remove_tree(tree) is None and not os.path.lexists(tree)
    assert (outside / "keep.txt").read_text() == "not the job's"
    assert paths.remove_tree(tree) is None  # not there: nothing to say
    (tmp_path / "link").symlink_to(outside)
    assert paths.remove_tree(tmp_path / "link") is None and not os.path.lexists(tmp_path / "link")
    assert outside.is_dir()


def test_deleting_a_job_with_a_deep_output_removes_all_of_it(service: dict) -> None:
    job = aiplatform.CustomJob(display_name="deep", worker_pool_specs=[pool(code=deep_output(), form="sdk")])
    job.run()
    folder = paths.jobs_dir() / job_id(job.resource_name)
    assert (folder / "logs" / "workerpool0-0.log").is_file() and (folder / "deep" / "a").is_dir()
    job.delete()
    assert not folder.exists()
    with pytest.raises(api_exceptions.NotFound):
        aiplatform.CustomJob.get(job.resource_name)


def test_a_delete_that_cannot_remove_the_files_says_so_and_keeps_the_job(service: dict) -> None:
    """A path longer than the system allows (PATH_MAX) cannot be removed by its name: the delete answers
    Google's error shape naming the folder, and the job is kept so that it can be deleted again."""
    job = aiplatform.CustomJob(display_name="too-long", worker_pool_specs=[
        pool(code=deep_output(levels=25, name="n" * 200), form="sdk")])
    job.run()
    folder = paths.jobs_dir() / job_id(job.resource_name)
    try:
        with pytest.raises(api_exceptions.GoogleAPICallError) as raised:
            job.delete()
        error = raised.value.response.json()["error"]
        assert (error["code"], error["status"]) == (400, "FAILED_PRECONDITION")
        assert error["message"].startswith(f"CustomJob {folder.name} was not deleted: its folder {folder} could "
                                           "not be removed whole (")
        assert "File name too long" in error["message"] and "\n" not in error["message"]
        assert aiplatform.CustomJob.get(job.resource_name).state.name == "JOB_STATE_SUCCEEDED"  # still listed
    finally:
        shutil.rmtree(folder / "deep", ignore_errors=True)  # relative to open folders: no length limit
    job.delete()  # once the user removed what was left
    assert not folder.exists()
