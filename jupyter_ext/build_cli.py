"""`vtrain build`: package a trainer, build its image, optionally push it.

    vtrain build PATH [--image URI] [--base-image NAME] [--requirements FILE|PKG...] [--push]
                 [--machine-type TYPE | --platform PLATFORM]

PATH is a .py file, a trainer folder, or `-` for code on stdin. Progress is
printed as it happens; the last line is the image reference (with its digest
when pushed). The image is built for linux/amd64 unless `--machine-type` names an
arm64 machine (A4X: `catalog.platform`) or `--platform` says otherwise. Exit 0 when
built (and pushed), 1 when the build or push failed, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from . import catalog, packaging
from .errors import WorkbenchError

if TYPE_CHECKING:  # the Docker client is imported when a build runs, not for `vtrain --help`
    from . import images

USAGE_ERROR = 2


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `build` command to a `vtrain` subparsers object."""
    b: argparse.ArgumentParser = subparsers.add_parser(
        "build", help="package a trainer and build (and push) its image",
        description="Write the trainer in the codelab's layout (trainer/task.py, Dockerfile, .dockerignore), build "
                    "its image tagged by the content hash, and optionally push it to Artifact Registry, GCR or any "
                    "registry with the credentials of your Docker config (`gcloud auth configure-docker`).")
    b.add_argument("path", metavar="PATH", help="a .py file (becomes trainer/task.py), a folder holding trainer/ "
                   "or task.py, or - to read the code from stdin")
    b.add_argument("--image", metavar="URI", help="repository to tag (and push) the image as, optionally with a tag, "
                   "e.g. us-central1-docker.pkg.dev/PROJECT/REPO/trainer:v1; default: vtrain/<name>")
    b.add_argument("--base-image", metavar="NAME", help="a prebuilt training image by name ("
                   f"{', '.join(packaging.base_image_names())}, optionally :VERSION such as tf:2.16) or any image; "
                   "default: tf")
    b.add_argument("--requirements", metavar="FILE|PKG", nargs="+", help="a requirements file, or requirement "
                   "lines (local .whl/.tar.gz files are copied into the image); default: the folder's "
                   "requirements.txt. Put PATH before this option")
    b.add_argument("--push", action="store_true", help="push every tag of the image (needs --image)")
    b.add_argument("--gpu", action="store_true", help="use the GPU variant of a named base image")
    b.add_argument("--region", default="us", choices=packaging.REGIONS, help="multi-region of the prebuilt "
                   "base images (default: us)")
    b.add_argument("--context-dir", metavar="DIR", help="where to write the build context (default: the "
                   "workbench's data folder, builds/<name>-<content hash>)")
    b.add_argument("--sdist", metavar="DIR", help="also write the trainer as an sdist into DIR, for "
                   "pythonPackageSpec.packageUris")
    target = b.add_mutually_exclusive_group()
    target.add_argument("--machine-type", metavar="TYPE", help="build for the CPU architecture of this Vertex AI "
                        "machine type (linux/arm64 for a4x-highgpu-4g)")
    target.add_argument("--platform", choices=sorted(set(catalog.PLATFORMS.values())), help="the platform to "
                        f"build for (default: {catalog.DEFAULT_PLATFORM})")
    b.add_argument("--engine", metavar="URL", help="Docker engine (default: DOCKER_HOST, else the local socket)")
    b.add_argument("--network", metavar="MODE", help="network of RUN steps during the build, e.g. host")
    b.add_argument("--quiet", action="store_true", help="print only the result")
    b.set_defaults(func=cmd_build)
    return b


def cmd_build(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from . import images

    out = out or sys.stdout
    platform = _platform(args)
    source: packaging.Source = sys.stdin.read() if args.path == "-" else Path(args.path)
    requirements: Any = args.requirements
    if requirements and len(requirements) == 1 and _is_requirements_file(requirements[0]):
        requirements = Path(requirements[0])
    ctx = packaging.build_context(source, requirements=requirements, base_image=args.base_image, gpu=args.gpu,
                                  region=args.region, platform=platform)
    if args.sdist:
        print(f"vtrain: sdist {packaging.write_sdist(ctx, args.sdist)}", file=out, flush=True)
    printer = _Printer(out, quiet=args.quiet)
    try:
        result = images.build_and_push(ctx, image=args.image, push_image=args.push, context_dir=args.context_dir,
                                       engine=args.engine, network_mode=args.network, on_event=printer,
                                       name=images.source_name(source), platform=platform)
    except (images.BuildError, images.PushError, images.EngineError) as exc:
        printer.finish_line()
        print(f"vtrain: error: {exc}", file=sys.stderr, flush=True)
        return 1  # the build failed (as `vtrain run` says for a failed job); usage errors are 2
    printer.finish_line()
    if result.digest:
        print(f"vtrain: image {result.reference} (tags: {', '.join(result.tags)})", file=out, flush=True)
    else:
        print(f"vtrain: image {result.reference} ({result.image_id}; not pushed)", file=out, flush=True)
    return 0


def _platform(args: argparse.Namespace) -> str:
    if args.machine_type:
        if catalog.machine(args.machine_type) is None:
            raise WorkbenchError(f"--machine-type: {args.machine_type!r} is not a Vertex AI training machine type")
        return catalog.platform(args.machine_type)
    return args.platform or catalog.DEFAULT_PLATFORM


def _is_requirements_file(value: str) -> bool:
    path = Path(value)
    return path.is_file() and not value.endswith(packaging.DEPENDENCY_SUFFIXES)


class _Printer:
    """Prints events as lines; layer transfers show one updating line on a terminal."""

    def __init__(self, out: TextIO, quiet: bool = False) -> None:
        self.out, self.quiet = out, quiet
        self.tty = hasattr(out, "isatty") and out.isatty()
        self.started: set[str] = set()
        self.open_line = False
        self.last_update = 0.0

    def __call__(self, event: images.Event) -> None:
        from . import images

        if self.quiet:
            return
        if isinstance(event, images.LayerProgress) and event.status in ("pushing", "downloading", "extracting"):
            key = f"{event.action}:{event.layer_id}"
            if self.tty:
                now = time.monotonic()
                if now - self.last_update > 0.2 and event.total:
                    self.last_update = now
                    self._write(f"\r  layer {event.layer_id}: {event.status} "
                                f"{images._size(event.current)}/{images._size(event.total)}\x1b[K", newline=False)
                    self.open_line = True
            elif key not in self.started:
                self.started.add(key)
                size = f" {images._size(event.total)}" if event.total else ""
                self._write(f"  layer {event.layer_id}: {event.status}{size}")
            return
        text = images.describe(event)
        if text is not None and not isinstance(event, images.Failure):  # failures end in one error line
            self.finish_line()
            self._write(text)

    def finish_line(self) -> None:
        if self.open_line:
            self._write("\r\x1b[K", newline=False)
            self.open_line = False

    def _write(self, text: str, newline: bool = True) -> None:
        self.out.write(text + ("\n" if newline else ""))
        self.out.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """`vtrain build` on its own (the same as `vtrain build` once cli.py adds it)."""
    parser = argparse.ArgumentParser(prog="vtrain")
    add_parser(parser.add_subparsers(title="commands", metavar="COMMAND"))
    args = parser.parse_args(["build", *(argv if argv is not None else sys.argv[1:])])
    try:
        return int(args.func(args))
    except WorkbenchError as exc:
        for line in str(exc).splitlines():
            print(f"vtrain: error: {line}", file=sys.stderr)
        return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
