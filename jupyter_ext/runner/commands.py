"""What a pool runs when its replicas are processes on this machine.

- pythonPackageSpec: `python -m <pythonModule> <args>` with the submitting
  client's interpreter (its `Runtime`, see `environment`); `packageUris` may be local folders, wheels, sdists, `file://`
  URIs or, as on Vertex AI, `gs://` files (fetched into the job folder with
  google-cloud-storage, which honours STORAGE_EMULATOR_HOST); they are put on
  PYTHONPATH, before the client's own import path (wheels import from the zip;
  sdists are unpacked into the job folder). Dependencies the packages declare
  are not installed: replicas use the client's Python environment.
- containerSpec with `command`: that command and `args` run on this host; a
  leading `python`/`python3` means the client's interpreter.
- containerSpec without `command`: the image's entrypoint is unknown here, so
  the process backend refuses with a message naming the field.
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from google.cloud.aiplatform_v1 import types as v1

from .. import staging
from ..environment import Runtime
from ..errors import BackendError, WorkbenchError

_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclass
class HostCommand:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def host_command(pool: v1.WorkerPoolSpec, where: str, work_dir: Path, runtime: Runtime,
                 base_dir: Path | None = None) -> HostCommand:
    """`base_dir` anchors relative package paths (the job file's folder; default: the current one)."""
    import_path = list(runtime.path)
    if "python_package_spec" in pool:
        pkg = pool.python_package_spec
        import_path[:0] = [str(_package_path(uri, f"{where}.pythonPackageSpec.packageUris[{n}]", work_dir, base_dir))
                           for n, uri in enumerate(pkg.package_uris)]
        argv = [runtime.python, "-m", pkg.python_module, *pkg.args]
        return HostCommand(argv, {"PYTHONPATH": os.pathsep.join(import_path)} if import_path else {})
    spec = pool.container_spec
    if not spec.command:
        raise BackendError(f"{where}.containerSpec.command: the process backend cannot run the entrypoint of image "
                           f"{spec.image_uri!r}; set command (e.g. [\"python\", \"-m\", \"trainer.task\"]) "
                           "or use --backend docker")
    argv = [*spec.command, *spec.args]
    if argv[0] in ("python", "python3"):
        argv[0] = runtime.python
    return HostCommand(argv, {"PYTHONPATH": os.pathsep.join(import_path)} if import_path else {})


def pool_env(pool: v1.WorkerPoolSpec, base: dict[str, str]) -> dict[str, str]:
    """The pool's `env` list on top of `base`, with Kubernetes-style `$(VAR)`
    expansion from earlier values (`$$` stands for a literal `$`)."""
    env = dict(base)
    spec = pool.container_spec if "container_spec" in pool else pool.python_package_spec
    for var in spec.env:
        env[var.name] = _VAR.sub(lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), var.value)
    return env


def _package_path(uri: str, where: str, work_dir: Path, base_dir: Path | None) -> Path:
    parsed = urlparse(uri)
    if parsed.scheme == "gs":
        try:
            path = staging.download(uri, work_dir / "downloads", where)
        except WorkbenchError as exc:
            raise BackendError(str(exc)) from None
    elif parsed.scheme in ("", "file"):
        path = (base_dir or Path.cwd()) / Path(parsed.path if parsed.scheme == "file" else uri).expanduser()
    else:
        raise BackendError(f"{where}: {uri!r} is neither on this machine nor in Cloud Storage; local runs take "
                           "folders, wheels, sdists, file:// or gs:// URIs")
    path = path.resolve()
    if not path.exists():
        raise BackendError(f"{where}: {path} does not exist")
    if path.is_dir() or path.suffix == ".whl":
        return path
    if path.name.endswith((".tar.gz", ".tgz")):
        return _unpack_sdist(path, work_dir / "packages")
    raise BackendError(f"{where}: {path.name} is not a folder, a wheel (.whl) or an sdist (.tar.gz)")


def _unpack_sdist(path: Path, into: Path) -> Path:
    # a safe folder name: the SDK's staged names hold ':', which would split PYTHONPATH
    target = into / re.sub(r"[^\w.-]", "_", path.name.removesuffix(".tar.gz").removesuffix(".tgz"))
    if not target.exists():
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        try:
            with tarfile.open(path) as tar:
                tar.extractall(partial, filter="data")  # no paths outside the folder, no devices
        except (tarfile.TarError, OSError) as exc:
            raise BackendError(f"{path}: cannot unpack the sdist: {exc}") from None
        partial.rename(target)
    # an sdist holds one top folder, with the package inside it or inside src/
    tops = [p for p in target.iterdir() if p.is_dir()]
    root = tops[0] if len(tops) == 1 else target
    return root / "src" if (root / "src").is_dir() else root
