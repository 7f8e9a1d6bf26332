"""Where the workbench keeps its files, who may read them, and local job IDs.

The data folder holds jobs' logs, their job.json (with the `env` values), the job store, the
service's token: only its owner may read them. Folders the workbench makes there are 0700
(`private_dir`) and its files 0600 (`private_opener` for `open()`, `private_file` for a file
another library creates, such as SQLite's, `write_private` for a whole file at once). Code that writes
either there or to a folder the user chose asks `in_data_dir`.

A job's folder holds whatever its replicas wrote, at any depth: code that measures or removes one
(`vtrain gc`, the service's DELETE) uses `walk_tree` and `remove_tree`, which never recurse (Python's
`shutil.rmtree` and a recursive walk raise RecursionError past about 1,000 nested folders), never
follow a symbolic link, and report what they could not read or remove instead of raising.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import platformdirs

DIR_MODE = 0o700
FILE_MODE = 0o600


def data_dir() -> Path:
    """`$VTRAIN_HOME`, else the user's data folder (~/.local/share/vertex-workbench)."""
    home = os.environ.get("VTRAIN_HOME")
    return Path(home).expanduser() if home else Path(platformdirs.user_data_dir("vertex-workbench"))


def job_store_file() -> Path:
    """The local service's SQLite store of jobs (read by `vtrain gc` too)."""
    return data_dir() / "jobs.sqlite"


def jobs_dir() -> Path:
    return data_dir() / "jobs"


def in_data_dir(path: Path) -> bool:
    """Whether `path` is in the data folder, so that only its owner may read it."""
    root, path = data_dir().resolve(), Path(path).resolve()
    return path == root or root in path.parents


def private_dir(path: Path | None = None) -> Path:
    """`path` (default: the data folder) made if missing, with every folder it needed, 0700. The
    data folder itself is made 0700 too when `path` is in it (an older version made it 0755)."""
    root = data_dir()
    path = root if path is None else Path(path)
    for folder in reversed([p for p in (path, *path.parents) if not p.exists()]):
        folder.mkdir(mode=DIR_MODE, exist_ok=True)
        os.chmod(folder, DIR_MODE)  # mkdir's mode passes through the umask
    for folder in {path, root} if path == root or root in path.parents else {path}:
        info = folder.stat()
        if info.st_mode & 0o777 != DIR_MODE and info.st_uid == os.getuid():
            os.chmod(folder, DIR_MODE)
    return path


def make_dir(path: Path) -> Path:
    """A folder the workbench makes for a job or a build: private (`private_dir`) in the data folder,
    with the umask's modes in a folder the user chose."""
    if in_data_dir(path):
        return private_dir(path)
    Path(path).mkdir(parents=True, exist_ok=True)
    return Path(path)


def folder_problem(path: Path) -> str | None:
    """Why a job cannot write its outputs in `path` (made if missing), in words for one line; None if it can."""
    try:
        make_dir(path)
    except FileExistsError:
        return f"{path} is a file, not a folder"
    except OSError as exc:
        return f"cannot make the folder {path} ({exc.strerror})"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"cannot write in {path}"
    return None


def private_opener(path: str | os.PathLike[str], flags: int) -> int:
    """An `opener` for `open()`: a file it creates is 0600, one that exists is made 0600."""
    fd = os.open(path, flags, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return fd


def private_file(path: Path) -> Path:
    """`path` created empty if missing, 0600, in a private folder: for a file another library then
    opens (SQLite gives its journal and WAL files the database's mode). A file that exists is not
    opened: closing any descriptor of a file drops this process's locks on it, SQLite's too (its
    WAL would then be deleted under a connection still using it)."""
    private_dir(path.parent)
    try:
        os.chmod(path, FILE_MODE)
    except FileNotFoundError:
        os.close(private_opener(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC))
    return path


def write_private(path: Path, data: str | bytes) -> None:
    """Replace `path` whole (readers see the old or the new content, never a part), 0600."""
    private_dir(path.parent)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.partial")  # one per writer
    try:
        with open(partial, "wb", opener=private_opener) as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)  # a full disk leaves no half-written file behind
        raise


def walk_tree(path: Path, on_error: Callable[[Path, OSError], None] | None = None
              ) -> Iterator[tuple[Path, os.stat_result]]:
    """`path` and everything under it, each with its lstat, a folder before what it holds; a symbolic
    link is yielded, never followed. What cannot be read goes to `on_error` (default: skipped)."""
    def failed(where: Path, exc: OSError) -> None:
        if on_error is not None and not isinstance(exc, FileNotFoundError):  # gone meanwhile: nothing to say
            on_error(where, exc)

    try:
        pending = [(Path(path), os.lstat(path))]
    except OSError as exc:
        failed(Path(path), exc)
        return
    while pending:  # a stack, not recursion: any depth
        here, info = pending.pop()
        yield here, info
        if not stat.S_ISDIR(info.st_mode):
            continue
        try:
            with os.scandir(here) as entries:
                for entry in entries:
                    try:
                        pending.append((Path(entry.path), entry.stat(follow_symlinks=False)))
                    except OSError as exc:
                        failed(Path(entry.path), exc)
        except OSError as exc:
            failed(here, exc)


def remove_tree(path: Path) -> str | None:
    """Remove `path` and everything under it (a symbolic link itself, never what it points to), at any
    depth. Returns what could not be removed, in words for one line; None when it is gone (or was not there)."""
    errors: list[str] = []

    def failed(where: Path, exc: OSError) -> None:
        errors.append(f"{_shown(where)}: {exc.strerror or exc}")

    folders = []
    for here, info in walk_tree(path, failed):
        if stat.S_ISDIR(info.st_mode):
            folders.append(here)
            continue
        try:
            os.unlink(here)
        except FileNotFoundError:
            pass
        except OSError as exc:
            failed(here, exc)
    for folder in reversed(folders):  # each after everything it held
        try:
            os.rmdir(folder)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if not (errors and exc.errno == errno.ENOTEMPTY):  # not empty because of an error already said
                failed(folder, exc)
    if not errors:
        return None
    return errors[0] + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")


def _shown(path: Path, limit: int = 160) -> str:
    """A path for a message: the middle of a very long one left out."""
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-limit // 2:]}"


def new_job_id() -> str:
    """A numeric ID like Vertex's CustomJob IDs: time-ordered, 19 digits."""
    return f"{time.time_ns() // 1000:016d}{secrets.randbelow(1000):03d}"


def local_output_dir(base: str, job_dir: Path) -> tuple[str, str]:
    """The local folder for a job's base output directory, and a note when it was moved.

    Local runs keep outputs on this machine: no base gives `<job dir>/output/`,
    a `gs://bucket/path` base maps to `<data dir>/gcs/bucket/path/`, never outside
    `<data dir>/gcs/` (a path that leaves its bucket is refused, see `staging.split_uri`).
    """
    if not base:
        return f"{job_dir / 'output'}/", ""
    if base.startswith("gs://"):
        from .errors import SpecError
        from .staging import split_uri  # imported here: staging builds on packaging

        bucket, path = split_uri(base, "baseOutputDirectory")
        root = data_dir() / "gcs"
        local = root / bucket / path
        if not local.resolve().is_relative_to(root.resolve()):  # a link under the bucket folder
            raise SpecError("baseOutputDirectory", f"{base} leads outside the local bucket folder {root}")
        return f"{local}/", f"baseOutputDirectory {base} is kept locally in {local}/"
    return base, ""
