"""What reaches a local replica from this machine, and from whoever submitted the job.

A replica on Vertex AI sees the environment Vertex gives it (see `cluster`) and its job's `env`;
nothing of the machine the job was sent from. A local process replica gets the same, plus only what
a process needs to start (`HOST_VARIABLES`: PATH, HOME, the locale, the Python environment's own
variables, and the Cloud Storage emulator's address when one is used), taken from the submitting
client, not from the local service (which may have been started by someone else: a JupyterLab
server, another kernel). Anything else reaches a replica
only when the user passes it: `--env NAME=VALUE` (or `--env NAME`, this environment's value) on
the magic and the CLI, which puts it into the job's `env`, so Vertex AI gets it too.

A client's `Runtime` (its interpreter, its import path, its share of HOST_VARIABLES) travels to
the local service with the create request (the `x-vtrain-client` header, sent only to the local
service), so process replicas run with the kernel's or the terminal's Python, whoever started the
service.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

from .errors import WorkbenchError

# What a process needs to start, and the Python environment's own variables; never credentials.
HOST_VARIABLES = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
                  "TERM", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PYTHONHOME",
                  # where this machine's stand-in for Cloud Storage is (google-cloud-storage's own convention):
                  # a trainer's gs:// reads go where the local service's package downloads go
                  "STORAGE_EMULATOR_HOST")
CLIENT_HEADER = "x-vtrain-client"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Runtime:
    """The Python a process replica runs with: an interpreter, import path entries, host variables."""

    python: str
    path: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def here(cls) -> Runtime:
        """This process's: its interpreter, the import path it added to its interpreter's own (its
        PYTHONPATH and anything put on sys.path outside the Python installation), its HOST_VARIABLES."""
        prefixes = tuple({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})
        path = [os.path.realpath(p) for p in sys.path if p and os.path.isabs(p)]
        extra = [p for p in dict.fromkeys(path) if not _inside(p, prefixes) and os.path.isdir(p)]
        return cls(sys.executable, tuple(extra), {k: os.environ[k] for k in HOST_VARIABLES if k in os.environ})

    def describe(self) -> str:
        """What a dry run and `vtrain inspect` say about process replicas."""
        path = f"; import path {os.pathsep.join(self.path)}" if self.path else ""
        return (f"Process replicas run with {self.python}{path}; of this machine's environment they get only "
                f"{', '.join(sorted(self.env))} (--env NAME[=VALUE] adds more, for Vertex AI too)")

    def header(self) -> str:
        return base64.urlsafe_b64encode(json.dumps(asdict(self)).encode()).decode()

    @classmethod
    def from_header(cls, text: str) -> Runtime | None:
        """A client's runtime from its header; None for anything malformed (the service's own then)."""
        try:
            data = json.loads(base64.urlsafe_b64decode(text.encode()))
            runtime = cls(str(data["python"]), tuple(map(str, data["path"])),
                          {str(k): str(v) for k, v in data["env"].items() if k in HOST_VARIABLES})
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None
        return runtime if os.path.isabs(runtime.python) else None


def _inside(path: str, folders: Sequence[str]) -> bool:
    """`path` is one of `folders` or under one (by path components: /opt/env2 is not under /opt/env)."""
    return any(os.path.commonpath((path, folder)) == folder for folder in folders)


def env_flags(values: Sequence[str] | None, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """`--env NAME=VALUE` / `--env NAME` (this environment's value) as a mapping; one-line errors."""
    found: dict[str, str] = {}
    for item in values or ():
        name, eq, value = item.partition("=")
        if not _NAME.fullmatch(name):
            raise WorkbenchError(f"--env: {item!r} is not NAME=VALUE or NAME (a variable name)")
        if not eq:
            if name not in environ:
                raise WorkbenchError(f"--env {name}: not set in this environment (give {name}=VALUE)")
            value = environ[name]
        found[name] = value
    return found
