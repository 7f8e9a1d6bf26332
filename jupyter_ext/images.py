"""Build, push and pull images with the `docker` SDK, as streams of progress events.

`build(context, tag)`, `push(ref)` and `pull(ref)` are generators of small event
dataclasses (`BuildStep`, `BuildOutput`, `LayerProgress`, `Built`, `Pushed`,
`Pulled`, `Failure`) that the CLI prints and widgets render. A failure is yielded
as a `Failure` event and then raised as a `BuildError`, `PushError` or
`PullError` whose one-line message names the Dockerfile step or the registry and
the reason. `build_trainer()` is the one call from a cell, file or folder to a
built (and optionally pushed) image, tagged by the content hash of its context.

The engine is `DOCKER_HOST` (with `DOCKER_TLS_VERIFY`/`DOCKER_CERT_PATH`) or the
`engine` argument. Registry credentials come from the user's Docker config and
credential helpers (`docker-credential-*`, as `gcloud auth configure-docker`
sets them up), read by the SDK; none is ever printed or put in an event.

Builds use the engine's classic builder, whose stream reports steps and cache
hits ("Step 3/6 : ...", "---> Using cache"). Every build names its target platform
(`platform`, default `linux/amd64`: Vertex AI's x86 machines) instead of taking the
engine's own; `catalog.image_platform(job)` gives `linux/arm64` for A4X jobs, and such
images get their own content tag (`<hash>-arm64`).
"""

from __future__ import annotations

import io
import os
import re
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import packaging
from .catalog import DEFAULT_PLATFORM
from .errors import BuildError, EngineError, ImageError, PullError, PushError

if TYPE_CHECKING:
    import docker

DEFAULT_ENGINE = "unix:///var/run/docker.sock"
LOCAL_REPOSITORY = "vtrain"
TIMEOUT = 300  # seconds for one engine call (a build or push stream may take longer between chunks)


# ---- events ------------------------------------------------------------------

@dataclass(frozen=True)
class ContextReady:
    path: str  # where the context was written ("" when built from memory)
    digest: str
    files: int
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True)
class BuildStep:
    n: int
    total: int
    text: str  # the Dockerfile instruction, e.g. "RUN python -m pip install ..."
    cached: bool


@dataclass(frozen=True)
class BuildOutput:
    text: str  # one line of a step's output


@dataclass(frozen=True)
class LayerProgress:
    layer_id: str
    action: str  # pull | push
    current: int = 0
    total: int = 0
    status: str = ""  # waiting, pushing/downloading/extracting, exists, done


@dataclass(frozen=True)
class Built:
    image_id: str
    tags: tuple[str, ...]


@dataclass(frozen=True)
class Pushed:
    ref: str
    digest: str


@dataclass(frozen=True)
class Pulled:
    ref: str
    digest: str


@dataclass(frozen=True)
class Failure:
    message: str


Event = ContextReady | BuildStep | BuildOutput | LayerProgress | Built | Pushed | Pulled | Failure
OnEvent = Callable[[Event], None]


# ---- the engine --------------------------------------------------------------

def engine_url(engine: str | None = None) -> str:
    return engine or os.environ.get("DOCKER_HOST") or DEFAULT_ENGINE


def connect(engine: str | None = None, *, max_pool_size: int = 10, timeout: int = TIMEOUT) -> docker.APIClient:
    """A low-level client for the engine at `engine` (default: DOCKER_HOST), checked to answer."""
    import docker
    import docker.utils

    url = engine_url(engine)
    kwargs: dict[str, Any] = {}
    if engine is None:
        kwargs = docker.utils.kwargs_from_env()  # DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH
    kwargs["base_url"] = url
    try:
        client = docker.APIClient(version="auto", timeout=timeout, max_pool_size=max_pool_size, **kwargs)
        client.ping()
    except Exception as exc:  # noqa: BLE001  (the SDK raises DockerException or a requests error for the same causes)
        raise EngineError(f"cannot reach the Docker engine at {url}: {_reason(exc)}") from None
    return client


def _reason(exc: BaseException) -> str:
    """The most specific readable cause in an exception chain."""
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo:
        e = todo.pop()
        if e in seen:
            continue
        seen.append(e)
        if isinstance(e, OSError) and e.strerror:
            return e.strerror
        todo += [a for a in getattr(e, "args", ()) if isinstance(a, BaseException)]
        todo += [c for c in (e.__cause__, e.__context__) if c is not None]
    text = re.sub(r"^Error while fetching server API version: ", "", str(exc)).strip()
    return text or type(exc).__name__


def _api_message(exc: Exception) -> str:
    explanation = getattr(exc, "explanation", None)
    if explanation:
        return str(explanation.decode() if isinstance(explanation, bytes) else explanation).strip()
    return _reason(exc)


def registry_of(ref: str) -> str:
    """The registry host of an image reference (docker.io for Docker Hub names)."""
    from docker import auth, utils

    repo, _ = utils.parse_repository_tag(ref)
    return str(auth.resolve_repository_name(repo)[0])


def split_ref(ref: str) -> tuple[str, str | None]:
    """(repository, tag or digest) of an image reference."""
    from docker import utils

    repo, tag = utils.parse_repository_tag(ref)
    return str(repo), tag


# ---- build -------------------------------------------------------------------

_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_LAYER_ID = re.compile(r"^---> [0-9a-f]{12,}$")


def build(
    context: packaging.BuildContext | Mapping[str, bytes] | str | os.PathLike[str],
    tag: str | Sequence[str],
    *,
    engine: str | None = None,
    client: docker.APIClient | None = None,
    nocache: bool = False,
    pull: bool = False,
    network_mode: str | None = None,
    labels: Mapping[str, str] | None = None,
    platform: str = DEFAULT_PLATFORM,
) -> Iterator[Event]:
    """Build `context` (a BuildContext, a {path: bytes} dict or a folder) for `platform` and tag it.

    `tag`: one reference or several (the first is given to the builder, the
    others are added after). Yields BuildStep/BuildOutput/LayerProgress events
    and finally Built; on failure yields Failure and raises BuildError.
    """
    api = client or connect(engine)
    tags = [tag] if isinstance(tag, str) else list(tag)
    if isinstance(context, (str, os.PathLike)):
        kwargs: dict[str, Any] = {"path": str(context)}
    else:
        kwargs = {"fileobj": io.BytesIO(packaging.context_tar(context)), "custom_context": True}
    try:
        stream = api.build(tag=tags[0], rm=True, forcerm=True, nocache=nocache, pull=pull, decode=True,
                           network_mode=network_mode, labels=dict(labels or {}), platform=platform, **kwargs)
        parser = _BuildStream()
        for chunk in stream:
            yield from parser.feed(chunk)
        yield from parser.end()
    except BuildError:
        raise
    except Exception as exc:  # noqa: BLE001  (a lost engine: requests errors)
        if _is_api_error(exc):
            message = f"build failed: {_api_message(exc)}"
        else:
            message = f"build failed: lost the Docker engine at {engine_url(engine)}: {_reason(exc)}"
        yield Failure(message)
        raise BuildError(message) from None
    for extra in tags[1:]:
        repo, t = split_ref(extra)
        api.tag(parser.image_id, repo, t or "latest")
    yield Built(parser.image_id, tuple(tags))


class _BuildStream:
    """Turns the classic builder's JSON stream into events."""

    def __init__(self) -> None:
        self.step: tuple[int, int, str] | None = None
        self.pending = False  # a step header seen, its cache status not yet
        self.partial = ""
        self.tail: deque[str] = deque(maxlen=5)
        self.image_id = ""

    def feed(self, chunk: dict[str, Any]) -> Iterator[Event]:
        if "error" in chunk or "errorDetail" in chunk:
            yield from self._flush_pending()
            message = (chunk.get("errorDetail") or {}).get("message") or chunk.get("error") or "unknown error"
            yield from self._fail(str(message).strip())
        if "aux" in chunk and isinstance(chunk["aux"], dict) and "ID" in chunk["aux"]:
            self.image_id = chunk["aux"]["ID"]
        if "stream" in chunk:
            text = self.partial + chunk["stream"]
            *lines, self.partial = text.split("\n")
            for line in lines:
                yield from self._line(_ANSI.sub("", line).rstrip("\r"))
        elif "status" in chunk:  # FROM pulling the base image
            yield from self._flush_pending()
            yield from _layer_event(chunk, "pull")

    def end(self) -> Iterator[Event]:
        if self.partial:
            yield from self._line(self.partial)
            self.partial = ""
        yield from self._flush_pending()
        if not self.image_id:
            yield from self._fail("the engine reported no image")

    def _line(self, line: str) -> Iterator[Event]:
        m = _STEP.match(line)
        if m:
            yield from self._flush_pending()
            self.step = (int(m.group(1)), int(m.group(2)), m.group(3).strip())
            self.pending = True
            self.tail.clear()
            return
        stripped = line.strip()
        if self.pending and self.step:
            self.pending = False
            # a cache hit; for FROM, the base image was already on the engine
            cached = stripped == "---> Using cache" or (
                self.step[2].upper().startswith("FROM ") and bool(_LAYER_ID.match(stripped)))
            yield BuildStep(*self.step, cached=cached)
            if stripped == "---> Using cache":
                return
        m = re.match(r"^Successfully built ([0-9a-f]+)$", stripped)
        if m:
            self.image_id = self.image_id or m.group(1)
            return
        if stripped.startswith(("---> ", "Removing intermediate container", "Successfully tagged")) or not stripped:
            return
        self.tail.append(stripped)
        yield BuildOutput(line)

    def _flush_pending(self) -> Iterator[Event]:
        if self.pending and self.step:
            self.pending = False
            yield BuildStep(*self.step, cached=False)

    def _fail(self, message: str) -> Iterator[Event]:
        if self.step:
            n, total, text = self.step
            where = f"Step {n}/{total} {text}"
        else:
            where = "Dockerfile"
        last = next((line for line in reversed(self.tail) if line != message), "")
        text = f"{where}: {message}" + (f" (last output: {last})" if last and "non-zero code" in message else "")
        yield Failure(text)
        raise BuildError(text)


# ---- push and pull -----------------------------------------------------------

_PUSH_STATUS = {"Preparing": "preparing", "Waiting": "waiting", "Pushing": "pushing", "Pushed": "done",
                "Layer already exists": "exists"}
_PULL_STATUS = {"Pulling fs layer": "waiting", "Waiting": "waiting", "Downloading": "downloading",
                "Verifying Checksum": "downloading", "Download complete": "downloaded", "Extracting": "extracting",
                "Pull complete": "done", "Already exists": "exists"}


def _layer_event(chunk: dict[str, Any], action: str) -> Iterator[LayerProgress]:
    layer, status = chunk.get("id"), str(chunk.get("status", ""))
    if not layer:
        return
    table = _PUSH_STATUS if action == "push" else _PULL_STATUS
    name = "exists" if status.startswith("Mounted from") else table.get(status)
    if name is None:
        return
    detail = chunk.get("progressDetail") or {}
    yield LayerProgress(str(layer), action, int(detail.get("current") or 0), int(detail.get("total") or 0), name)


def push(ref: str, *, engine: str | None = None, client: docker.APIClient | None = None) -> Iterator[Event]:
    """Push `ref` (repository:tag) with the credentials of the user's Docker config.
    Yields LayerProgress events and finally Pushed(ref, digest); on failure
    yields Failure and raises PushError naming the registry."""
    api = client or connect(engine)
    repo, tag = split_ref(ref)
    tag = tag or "latest"
    full = f"{repo}:{tag}"
    registry = registry_of(full)
    digest = ""
    try:
        for chunk in api.push(repo, tag=tag, stream=True, decode=True):
            if "error" in chunk or "errorDetail" in chunk:
                message = (chunk.get("errorDetail") or {}).get("message") or chunk.get("error")
                yield from _push_failure(full, registry, str(message))
            aux = chunk.get("aux")
            if isinstance(aux, dict) and aux.get("Digest"):
                digest = aux["Digest"]
            elif "status" in chunk:
                m = re.search(r"digest: (sha256:[0-9a-f]{64})", str(chunk["status"]))
                if m:
                    digest = digest or m.group(1)
                else:
                    yield from _layer_event(chunk, "push")
    except PushError:
        raise
    except Exception as exc:  # noqa: BLE001  (a lost engine: requests errors)
        reason = _api_message(exc) if _is_api_error(exc) else f"lost the Docker engine: {_reason(exc)}"
        yield from _push_failure(full, registry, reason)
    if not digest:
        yield from _push_failure(full, registry, "the engine reported no digest")
    yield Pushed(full, digest)


def _push_failure(ref: str, registry: str, message: str) -> Iterator[Event]:
    message = message.strip().splitlines()[0] if message.strip() else "unknown error"
    hint = ""
    if re.search(r"denied|unauthori[sz]ed|authentication required|no basic auth", message, re.IGNORECASE):
        if registry.endswith(("docker.pkg.dev", "gcr.io")):
            hint = f" (run `gcloud auth configure-docker {registry}`)"
        else:
            hint = f" (log in with `docker login {registry}`)"
    text = f"cannot push {ref} to registry {registry}: {message}{hint}"
    yield Failure(text)
    raise PushError(text)


def pull(ref: str, *, engine: str | None = None, client: docker.APIClient | None = None) -> Iterator[Event]:
    """Pull `ref` (a tag or `repo@sha256:...`). Yields LayerProgress events and
    Pulled(ref, digest); on failure yields Failure and raises PullError."""
    api = client or connect(engine)
    repo, tag = split_ref(ref)
    tag = tag or "latest"
    registry = registry_of(ref)
    digest = tag if tag.startswith("sha256:") else ""
    try:
        for chunk in api.pull(repo, tag=tag, stream=True, decode=True):
            if "error" in chunk or "errorDetail" in chunk:
                message = (chunk.get("errorDetail") or {}).get("message") or chunk.get("error")
                raise PullError(f"cannot pull {ref} from registry {registry}: {str(message).strip()}")
            status = str(chunk.get("status", ""))
            if status.startswith("Digest: "):
                digest = status.split(" ", 1)[1].strip()
            else:
                yield from _layer_event(chunk, "pull")
    except PullError as exc:
        yield Failure(str(exc))
        raise
    except Exception as exc:  # noqa: BLE001  (a lost engine: requests errors)
        reason = _api_message(exc) if _is_api_error(exc) else f"lost the Docker engine: {_reason(exc)}"
        text = f"cannot pull {ref} from registry {registry}: {reason}"
        yield Failure(text)
        raise PullError(text) from None
    yield Pulled(ref, digest)


def image_exists(client: docker.APIClient, ref: str) -> bool:
    import docker.errors

    try:
        client.inspect_image(ref)
        return True
    except docker.errors.NotFound:
        return False


def _is_api_error(exc: BaseException) -> bool:
    import docker.errors

    return isinstance(exc, docker.errors.APIError)


# ---- one call: package, build, push ------------------------------------------

@dataclass
class ImageResult:
    reference: str  # repo@sha256:... when pushed, else the content tag
    image_id: str
    tags: list[str]
    digest: str = ""  # the registry's manifest digest, when pushed
    context_dir: str = ""
    context_digest: str = ""
    skipped: list[str] = field(default_factory=list)


def image_tags(image: str | None, context: packaging.BuildContext, name: str = "trainer",
               platform: str = DEFAULT_PLATFORM) -> list[str]:
    """The content-hash tag of `image`'s repository (`-arm64` appended for a linux/arm64 build, so the
    two builds of one context never share a tag), then the user's tag if `image` has one."""
    if image:
        repo, user_tag = split_ref(image)
        if user_tag and user_tag.startswith("sha256:"):
            raise ImageError(f"--image: {image} names a digest; give a repository, optionally with a tag")
    else:
        repo, user_tag = f"{LOCAL_REPOSITORY}/{_docker_name(name)}", None
    suffix = "" if platform == DEFAULT_PLATFORM else "-" + platform.rsplit("/", 1)[-1]
    tags = [f"{repo}:{context.tag}{suffix}"]
    if user_tag and user_tag != tags[0].rsplit(":", 1)[1]:
        tags.append(f"{repo}:{user_tag}")
    return tags


def build_trainer(
    source: packaging.Source,
    *,
    image: str | None = None,
    base_image: str | None = None,
    requirements: Sequence[str] | str | os.PathLike[str] | None = None,
    gpu: bool = False,
    push_image: bool = False,
    context_dir: str | os.PathLike[str] | None = None,
    engine: str | None = None,
    network_mode: str | None = None,
    on_event: OnEvent | None = None,
    platform: str = DEFAULT_PLATFORM,
) -> ImageResult:
    """The one call: package `source` (cell text, a .py file or a folder) in the
    codelab's layout, write it to `context_dir` (default: the workbench's
    builds/<name>-<content tag>), build it for `platform`, and push every tag when `push_image`.
    Progress goes to `on_event`; errors are WorkbenchErrors with one-line messages."""
    ctx = packaging.build_context(source, requirements=requirements, base_image=base_image, gpu=gpu, platform=platform)
    return build_and_push(ctx, image=image, push_image=push_image, context_dir=context_dir, engine=engine,
                          network_mode=network_mode, on_event=on_event, name=source_name(source),
                          platform=platform)


def source_name(source: packaging.Source) -> str:
    """A short name for images of `source`: the file's or folder's name, else `trainer`."""
    if isinstance(source, str):
        return "trainer"
    path = Path(source).resolve()
    name = path.stem if path.is_file() else path.name
    return _docker_name(name) if name not in ("", "task", "trainer") else "trainer"


def default_context_dir(ctx: packaging.BuildContext, name: str = "trainer") -> Path:
    from . import paths

    return paths.data_dir() / "builds" / f"{_docker_name(name)}-{ctx.tag}"


def build_and_push(
    ctx: packaging.BuildContext,
    *,
    image: str | None = None,
    push_image: bool = False,
    context_dir: str | os.PathLike[str] | None = None,
    engine: str | None = None,
    network_mode: str | None = None,
    on_event: OnEvent | None = None,
    name: str = "trainer",
    platform: str = DEFAULT_PLATFORM,
) -> ImageResult:
    """Write `ctx`, build it for `platform` tagged by its content hash (plus `image`'s own tag),
    and push every tag when `push_image`."""
    emit = on_event or (lambda _e: None)
    if push_image and not image:
        raise ImageError("--push needs --image REGISTRY/REPOSITORY[:TAG] (e.g. "
                         "us-central1-docker.pkg.dev/PROJECT/REPO/trainer)")
    tags = image_tags(image, ctx, name, platform)
    written = packaging.write_context(ctx, context_dir or default_context_dir(ctx, name))
    emit(ContextReady(str(written), ctx.digest, len(ctx.files), ctx.skipped))
    client = connect(engine)
    try:
        image_id = ""
        for event in build(ctx, tags, client=client, network_mode=network_mode, platform=platform):
            emit(event)
            if isinstance(event, Built):
                image_id = event.image_id
        result = ImageResult(tags[0], image_id, tags, context_dir=str(written), context_digest=ctx.digest,
                             skipped=list(ctx.skipped))
        if push_image:
            for ref in tags:
                for event in push(ref, client=client):
                    emit(event)
                    if isinstance(event, Pushed):
                        result.digest = event.digest
            result.reference = f"{split_ref(tags[0])[0]}@{result.digest}"
        return result
    finally:
        client.close()


def describe(event: Event) -> str | None:
    """A one-line text for an event, or None for events not worth a line of their own."""
    if isinstance(event, ContextReady):
        where = f" in {event.path}" if event.path else ""
        left = f"; left out: {', '.join(event.skipped)}" if event.skipped else ""
        return f"context {event.digest[:16]}: {event.files} files{where}{left}"
    if isinstance(event, BuildStep):
        return f"Step {event.n}/{event.total} {event.text}" + (" (cached)" if event.cached else "")
    if isinstance(event, BuildOutput):
        return f"  {event.text}"
    if isinstance(event, LayerProgress):
        if event.status in ("done", "exists"):
            what = {"done": "pushed" if event.action == "push" else "pulled", "exists": "already there"}[event.status]
            size = f" ({_size(event.total)})" if event.total else ""
            return f"  layer {event.layer_id}: {what}{size}"
        return None
    if isinstance(event, Built):
        return f"built {event.image_id[:19]} as {', '.join(event.tags)}"
    if isinstance(event, Pushed):
        return f"pushed {event.ref}@{event.digest}"
    if isinstance(event, Pulled):
        return f"pulled {event.ref}" + (f" ({event.digest})" if event.digest and event.digest not in event.ref else "")
    if isinstance(event, Failure):
        return f"error: {event.message}"
    return None


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return str(n)


def _docker_name(name: str) -> str:
    clean = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._")
    return clean or "trainer"


__all__ = [
    "BuildError",
    "BuildOutput",
    "BuildStep",
    "Built",
    "ContextReady",
    "EngineError",
    "Event",
    "Failure",
    "ImageError",
    "ImageResult",
    "LayerProgress",
    "PullError",
    "Pulled",
    "PushError",
    "Pushed",
    "build",
    "build_and_push",
    "build_trainer",
    "connect",
    "default_context_dir",
    "describe",
    "image_tags",
    "pull",
    "push",
    "registry_of",
    "source_name",
]
