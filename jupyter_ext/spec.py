"""The job model: one `JobSpec` over the SDK's own v1 message types.

Every accepted job description (a CustomJob REST body, a gcloud `--config`
CustomJobSpec, the SDK's snake_case `worker_pool_specs`, a legacy AI Platform
`trainingInput`; JSON or YAML) loads into the same `JobSpec`, and dumps back to
any of them. Parsing goes through protobuf's JSON rules, so enum names and
numbers, camelCase and snake_case, and int64 as strings are all accepted, the
same as the Vertex API accepts them.

Every field the user gave reaches `custom_job()` (the request) and every format
that can hold it:
- CustomJob level: `displayName`, `labels` and `encryptionSpec` (the SDK form's
  `encryption_spec_key_name`). A gcloud config (a CustomJobSpec) holds neither
  labels nor the key: gcloud takes them as `--labels` and `--kms-key`.
- A CustomJob as the API returns it (`name`, `state`, `createTime`, `error`,
  `webAccessUris`, ...) loads too: the output-only fields are ignored.
- A legacy `trainingInput` maps onto the Vertex fields that mean the same:
  `scheduling.maxRunningTime` -> `scheduling.timeout`, `serviceAccount`,
  `network`, `enableWebAccess`, `encryptionConfig.kmsKeyName` ->
  `encryptionSpec.kmsKeyName`, `hyperparameters` -> `tuning` (a
  HyperparameterTuningJob's study and trial counts, see
  `tuning.from_legacy_hyperparameters`). `region` (where the job runs),
  `runtimeVersion` (it chose a package job's image) and `pythonVersion` are kept
  in `legacy`. All of them dump back to the same trainingInput keys.
- Legacy fields Vertex has no equivalent for are refused, one line naming the
  field, rather than dropped: `scheduling.maxWaitTime` (Vertex's
  `maxWaitDuration` only applies to FLEX_START jobs), `scheduling.priority`,
  `tpuTfVersion`, and in `hyperparameters` `resumePreviousJobId` and
  `enableTrialEarlyStopping: true`. So are keys that are not AI Platform fields, and a
  `workerCount` (`parameterServerCount`, `evaluatorCount`) above 0 without its `workerType`
  (AI Platform's rule). `scaleTier` is read by name or by AI Platform's number.
- Scheduling and access fields (`scheduling.*`, `serviceAccount`, `network`, `reservedIpRanges`,
  `enableWebAccess`, `enableDashboardAccess`, `tensorboard`, `persistentResourceId`, and a pool's
  `reservationAffinity`) are CustomJobSpec fields, so every Vertex format holds them. The SDK form
  writes the scheduling fields as `CustomJob.run()` takes them (`SDK_SCHEDULING`: `timeout` and
  `max_wait_duration` in whole seconds, `scheduling_strategy` by name, `restart_job_on_worker_restart`,
  `disable_retries`) and reads those or a `scheduling` mapping (not both for one field). Dumping to legacy
  refuses, one line naming the field, those a trainingInput cannot hold (all but `timeout`,
  `serviceAccount`, `network` and `enableWebAccess`).
- Dumping to legacy keeps what a trainingInput holds and refuses the rest, one line naming the field:
  a package job's module, packages and args are one for every replica and its images come from a
  `runtimeVersion`; a base output directory is a `jobDir` only with `--job-dir DIR` ending every
  replica's args (what reading a jobDir gives); `env` and a master of more replicas than one have
  no equivalent. Reading the trainingInput back must give the job written, else the first field
  that would change is refused.
- A job with a study (`tuning`) dumps its trial job in the Vertex formats;
  `tuning_job()` is the HyperparameterTuningJob to send, and `legacy` holds both.

Whatever is given, a mistake is one SpecError line naming the field's full path in the words of
JSON and YAML (`parse_message`), never another exception: `read_job_file`
takes only a regular UTF-8 text file of at most MAX_JOB_FILE_BYTES (a folder, a pipe, a binary or
an unreadable file is named as such); `parse_job_text` bounds nesting (MAX_NESTING) and, YAML
aliases expanded, size (MAX_YAML_NODES: a "billion laughs" is refused), and refuses keys that are
not text. Cloud Storage paths (`baseOutputDirectory`, `packageUris`, a legacy `jobDir`) are
normalised and refused when they leave their bucket (`gs://b/../x`).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from google.cloud.aiplatform_v1 import types as v1
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import FieldDescriptor

from . import catalog
from .errors import SpecError
from .names import FORMATS
from .staging import normalise_uri

POOL_ROLES = ("primary", "workers", "parameter servers", "evaluators")
PREBUILT_TRAINING = "us-docker.pkg.dev/vertex-ai/training"
MAX_JOB_FILE_BYTES = 10 * 1024 * 1024  # a job description is a few kB; this bounds what is read
MAX_NESTING = 50  # levels of mappings and lists; a job description needs fewer than 10
MAX_YAML_NODES = 100_000  # keys and values, YAML aliases expanded; a job description holds a few hundred

# AI Platform's named machine types (vertex-facts.md F) -> Compute Engine type and GPUs.
LEGACY_MACHINES: dict[str, tuple[str, str, int]] = {
    "standard": ("n1-standard-4", "", 0),
    "large_model": ("n1-highmem-8", "", 0),
    "complex_model_s": ("n1-highcpu-8", "", 0),
    "complex_model_m": ("n1-highcpu-16", "", 0),
    "complex_model_l": ("n1-highcpu-32", "", 0),
    "standard_gpu": ("n1-standard-8", "NVIDIA_TESLA_K80", 1),
    "complex_model_m_gpu": ("n1-highcpu-16", "NVIDIA_TESLA_K80", 4),
    "complex_model_l_gpu": ("n1-highcpu-32", "NVIDIA_TESLA_K80", 8),
    "standard_p100": ("n1-standard-8", "NVIDIA_TESLA_P100", 1),
    "complex_model_m_p100": ("n1-highcpu-16", "NVIDIA_TESLA_P100", 4),
}
# trainingInput role prefixes in pool order.
LEGACY_ROLES = ("master", "worker", "parameterServer", "evaluator")
_LEGACY_TIER_NAMES = ("BASIC", "STANDARD_1", "PREMIUM_1", "BASIC_GPU", "BASIC_TPU", "CUSTOM")
# TrainingInput.ScaleTier's numbers (googleapis, google/cloud/ml/v1/job_service.proto); that file predates
# BASIC_TPU, whose number is published nowhere found: it is taken by name only
_LEGACY_SCALE_TIERS = {0: "BASIC", 1: "STANDARD_1", 3: "PREMIUM_1", 6: "BASIC_GPU", 5: "CUSTOM"}
# every TrainingInput field (AI Platform REST reference); any other key is refused
_LEGACY_FIELDS = {
    "scaleTier", "jobDir", "args", "useChiefInTfConfig", "packageUris", "pythonModule", "runtimeVersion",
    "pythonVersion", "region", "scheduling", "serviceAccount", "network", "enableWebAccess", "encryptionConfig",
    "hyperparameters",
    *(f"{r}{s}" for r in LEGACY_ROLES for s in ("Type", "Config")),
    *(f"{r}Count" for r in LEGACY_ROLES[1:]),
}
_REPLICA_CONFIG_FIELDS = {"acceleratorConfig", "imageUri", "containerCommand", "containerArgs", "diskConfig"}
# legacy fields without a Vertex equivalent (the end of their path) -> why: refused, so the user
# removes them knowing what changes instead of believing they took effect
_LEGACY_REFUSED = {
    "scheduling.maxWaitTime": "Vertex AI has no wait limit for a standard job (scheduling.maxWaitDuration only "
                              "applies with strategy FLEX_START); remove it, or write a CustomJob with both",
    "scheduling.priority": "Vertex AI has no job priority; remove it",
    "tpuTfVersion": "Vertex AI has no TPU TensorFlow version: the image brings its own; remove it",
}
# Vertex fields a trainingInput cannot hold: dumping such a job as legacy is refused, naming the field
_NO_LEGACY = ("scheduling.strategy", "scheduling.maxWaitDuration", "scheduling.restartJobOnWorkerRestart",
              "scheduling.disableRetries", "reservedIpRanges", "enableDashboardAccess", "tensorboard",
              "persistentResourceId")
_NO_LEGACY_MACHINE = ("reservationAffinity", "gpuPartitionSize")
_DEFAULT_RUNTIME = "2.11"  # the runtimeVersion of a package job that gives none


@dataclass
class LegacyOptions:
    """What a legacy AI Platform job carries beyond its pools and their Vertex fields."""

    job_id: str
    use_chief_in_tf_config: bool = False
    job_dir: str = ""
    region: str = ""  # where the job runs: the default region when it is submitted
    runtime_version: str = ""  # chose the executor image of a pythonModule job
    python_version: str = ""  # on Vertex the executor image decides; kept for the round trip


@dataclass
class JobSpec:
    """One training job: the CustomJob fields a user sets (`display_name`, `spec`, `labels`,
    `encryption_spec`), what a legacy job adds (`legacy`), and a tuning study (`tuning`)."""

    display_name: str
    spec: v1.CustomJobSpec
    labels: dict[str, str] = field(default_factory=dict)
    legacy: LegacyOptions | None = None
    # the folder of the file it was loaded from: relative local packageUris are relative to it
    source_dir: Path | None = field(default=None, compare=False)
    _: KW_ONLY
    encryption_spec: v1.EncryptionSpec = field(default_factory=v1.EncryptionSpec)
    # a tuning study (from legacy `hyperparameters`): study_spec and the trial counts, no trial_job_spec
    tuning: v1.HyperparameterTuningJob | None = None

    # ---- views -------------------------------------------------------------
    @property
    def pools(self) -> list[tuple[int, v1.WorkerPoolSpec]]:
        """The pools that exist, with their position (an empty `{}` pool does not)."""
        return [(i, p) for i, p in enumerate(self.spec.worker_pool_specs) if not is_empty_pool(p)]

    @property
    def replica_count(self) -> int:
        return sum(p.replica_count for _, p in self.pools)

    def copy(self, **changes: Any) -> JobSpec:
        """A copy that shares nothing mutable with this job (the spec, labels and messages are
        copied), with `changes` to its fields."""
        fresh = {"spec": v1.CustomJobSpec.wrap(copy.deepcopy(self.spec._pb)), "labels": dict(self.labels),
                 "legacy": copy.deepcopy(self.legacy),
                 "encryption_spec": v1.EncryptionSpec.wrap(copy.deepcopy(self.encryption_spec._pb)),
                 "tuning": None if self.tuning is None else v1.HyperparameterTuningJob.wrap(
                     copy.deepcopy(self.tuning._pb))}
        return dataclasses.replace(self, **{**fresh, **changes})

    def training_pools(self) -> list[tuple[int, v1.WorkerPoolSpec]]:
        """The pools that run the trainer: every pool but a Reduction Server's (it runs Google's image)."""
        return [(pos, pool) for pos, pool in self.pools if not is_reduction_server_pool(pos, pool)]

    def with_env(self, env: Mapping[str, str]) -> JobSpec:
        """A copy whose training pools also set `env` (replacing variables of the same name)."""
        result = self.copy()
        for _, pool in result.training_pools():
            spec = pool.container_spec if "container_spec" in pool else pool.python_package_spec
            kept = [var for var in spec.env if var.name not in env]
            spec.env = kept + [v1.EnvVar(name=name, value=value) for name, value in env.items()]
        return result

    def custom_job_spec(self) -> v1.CustomJobSpec:
        """The CustomJobSpec Vertex would run: a legacy `jobDir` becomes `--job-dir`
        on every replica and, when unset, the base output directory."""
        spec = v1.CustomJobSpec.wrap(copy.deepcopy(self.spec._pb))
        if self.legacy and self.legacy.job_dir:
            for _, pool in _existing(spec):
                _pool_args(pool).extend(["--job-dir", self.legacy.job_dir])
            if not spec.base_output_directory.output_uri_prefix:
                spec.base_output_directory.output_uri_prefix = self.legacy.job_dir
        return spec

    def custom_job(self) -> v1.CustomJob:
        job = v1.CustomJob(display_name=self.display_name, job_spec=self.custom_job_spec(), labels=self.labels)
        if self.encryption_spec.kms_key_name:  # an unset key stays out of the body
            job.encryption_spec = self.encryption_spec
        return job

    def tuning_job(self) -> v1.HyperparameterTuningJob | None:
        """The HyperparameterTuningJob to send for a job with a study (`tuning`), else None:
        its trials run `custom_job()`'s spec, with its name, labels and encryption key."""
        if self.tuning is None:
            return None
        job = self.custom_job()
        resource = v1.HyperparameterTuningJob(self.tuning)
        resource.display_name, resource.trial_job_spec = job.display_name, job.job_spec
        resource.labels.update(job.labels)
        if "encryption_spec" in job:
            resource.encryption_spec = job.encryption_spec
        return resource

    # ---- loading -----------------------------------------------------------
    @classmethod
    def load(cls, source: Any, display_name: str | None = None) -> JobSpec:
        """Load from a path, JSON/YAML text, a dict or list, or a v1 message."""
        if isinstance(source, JobSpec):
            return source
        if isinstance(source, v1.CustomJob):
            return cls.from_dict(json_format.MessageToDict(source._pb), display_name)
        if isinstance(source, v1.CustomJobSpec):
            return cls.from_dict(json_format.MessageToDict(source._pb), display_name)
        if isinstance(source, Path) or (isinstance(source, str) and _looks_like_path(source)):
            path = Path(source)
            text = read_job_file(path)
            job = cls.from_dict(parse_job_text(text, f"job file {path}"), display_name or _name_from_path(path))
            job.source_dir = path.resolve().parent
            return job
        if isinstance(source, str):
            if len(source) > MAX_JOB_FILE_BYTES:
                raise SpecError("", f"job text is longer than {_size(MAX_JOB_FILE_BYTES)}, the most a job may hold")
            return cls.from_dict(parse_job_text(source, "job text"), display_name)
        return cls.from_dict(source, display_name)

    @classmethod
    def from_dict(cls, data: Any, display_name: str | None = None) -> JobSpec:
        _check_shape(data)
        if isinstance(data, list):
            return _checked(cls(display_name or "job", _parse_spec({"workerPoolSpecs": data}, "")), "")
        if not isinstance(data, dict):
            raise SpecError("", f"a job description must be a mapping or a list of pools, not {type(data).__name__}")
        if _has(data, "trainingInput") or _has(data, "scaleTier") or _has(data, "masterType"):
            return _checked(_from_legacy(data, display_name), "")
        if _has(data, "jobSpec"):
            job = parse_message(data, v1.CustomJob, "")  # output-only fields (state, times...) parse and are ignored
            return _checked(cls(job.display_name or display_name or "job", job.job_spec, dict(job.labels),
                                encryption_spec=job.encryption_spec), "jobSpec.")
        if "workerPoolSpecs" in data:
            return _checked(cls(display_name or "job", _parse_spec(data, "")), "")
        if "worker_pool_specs" in data:
            return _checked(_from_sdk(data, display_name), "", "base_output_dir")
        keys = ", ".join(sorted(map(str, data))) or "none"
        raise SpecError("", "not a job description: expected jobSpec (CustomJob), workerPoolSpecs (gcloud config), "
                            f"worker_pool_specs (SDK) or trainingInput (AI Platform); top-level keys: {keys}")

    # ---- dumping -----------------------------------------------------------
    def to_dict(self, fmt: str = "rest") -> Any:
        if fmt == "rest":
            return message_to_dict(self.custom_job())
        if fmt == "gcloud":
            return _ints(message_to_dict(self.custom_job_spec()))
        if fmt == "sdk":
            return _to_sdk(self)
        if fmt == "legacy":
            return _to_legacy(self)
        raise SpecError("--format", f"unknown format {fmt!r} (valid: {', '.join(FORMATS)})")

    def dump(self, fmt: str = "rest", as_yaml: bool = False) -> str:
        data = self.to_dict(fmt)
        if as_yaml:
            return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# ---- helpers shared with other modules ------------------------------------

def is_empty_pool(pool: v1.WorkerPoolSpec) -> bool:
    return pool._pb.ByteSize() == 0


def message_to_dict(message: Any) -> dict[str, Any]:
    """A v1 message as proto3 JSON (camelCase keys, enum names)."""
    return json_format.MessageToDict(message._pb)


def pool_image(pool: v1.WorkerPoolSpec) -> str:
    if "container_spec" in pool:
        return pool.container_spec.image_uri
    return pool.python_package_spec.executor_image_uri


def is_reduction_server_pool(position: int, pool: v1.WorkerPoolSpec) -> bool:
    """True for a Reduction Server pool: the third pool (workerPoolSpecs[2]) running a reducer image."""
    return position == 2 and catalog.is_reduction_server_image(pool_image(pool))


def _existing(spec: v1.CustomJobSpec) -> list[tuple[int, v1.WorkerPoolSpec]]:
    return [(i, p) for i, p in enumerate(spec.worker_pool_specs) if not is_empty_pool(p)]


def _pool_args(pool: v1.WorkerPoolSpec) -> Any:
    return pool.container_spec.args if "container_spec" in pool else pool.python_package_spec.args


# ---- reading ---------------------------------------------------------------

def read_job_file(path: Path) -> str:
    """The text of a job file; one SpecError naming the file when it is not a readable regular
    UTF-8 text file of at most MAX_JOB_FILE_BYTES."""
    where = f"job file {path}"
    try:
        # non-blocking: opening a named pipe must not wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SpecError("", f"no such job file: {path}") from None
    except OSError as exc:
        raise SpecError("", f"cannot read {where}: {exc.strerror or exc}") from None
    except ValueError:  # a NUL in the name
        raise SpecError("", f"no such job file: {str(path)!r}") from None
    try:
        kind = os.fstat(fd)
        if stat.S_ISDIR(kind.st_mode):
            raise SpecError("", f"{where} is a folder; give the job's JSON or YAML file")
        if not stat.S_ISREG(kind.st_mode):
            raise SpecError("", f"{where} is not a regular file (a pipe, socket or device); give a JSON or YAML file")
        if kind.st_size > MAX_JOB_FILE_BYTES:
            raise SpecError("", f"{where} is {_size(kind.st_size)}, more than the {_size(MAX_JOB_FILE_BYTES)} "
                                "a job file may hold")
        data = b""
        while len(data) <= MAX_JOB_FILE_BYTES:  # a file may grow, or report no size (/proc)
            chunk = os.read(fd, MAX_JOB_FILE_BYTES + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        raise SpecError("", f"cannot read {where}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_JOB_FILE_BYTES:
        raise SpecError("", f"{where} is more than the {_size(MAX_JOB_FILE_BYTES)} a job file may hold")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError("", f"{where} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                            "is it a binary file?") from None
    if "\0" in text:
        raise SpecError("", f"{where} is not text (it holds NUL bytes); is it a binary file?")
    return text


def _size(n: int) -> str:
    return f"{n / (1024 * 1024):.3g} MB"


class _Refused(Exception):
    def __init__(self, mark: Any, reason: str) -> None:
        self.mark, self.reason = mark, reason


class _SafeLoader(yaml.SafeLoader):
    """PyYAML's safe loader with what a document may expand to bounded: nesting (its composer
    recurses once per level) and, aliases (`*name`) and merge keys (`<<`) expanded, MAX_YAML_NODES
    values. Aliases share one object in memory, but whatever walks the data expands them: a few
    lines of aliases of aliases would be billions of values."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                raise _Refused(self.peek_event().start_mark, f"nested deeper than {MAX_NESTING} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            _check_expansion(node)
        return node


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a node graph that, aliases expanded, holds more than MAX_YAML_NODES nodes, nests deeper
    than MAX_NESTING or refers to itself. Sizes are counted once per node (post-order, no recursion)."""
    done: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded size, depth)
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        children = _children(node)
        if children_done:
            on_path.discard(key)
            size = 1 + sum(done[id(c)][0] for c in children)
            depth = 1 + max((done[id(c)][1] for c in children), default=0)
            if size > MAX_YAML_NODES:
                raise _Refused(node.start_mark, f"its YAML aliases expand to more than {MAX_YAML_NODES} values")
            if depth > MAX_NESTING:
                raise _Refused(node.start_mark, f"its YAML aliases nest deeper than {MAX_NESTING} levels")
            done[key] = (size, depth)
        elif key in on_path:
            raise _Refused(node.start_mark, "a YAML alias refers to a value that holds it")
        elif key not in done:
            on_path.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in done)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def parse_job_text(text: str, where: str) -> Any:
    """JSON or YAML text (YAML is a superset of JSON) as plain data; one SpecError naming `where`
    for anything else, for no value at all, and for nesting or aliases beyond MAX_NESTING and MAX_YAML_NODES."""
    try:
        data = yaml.load(text, Loader=_SafeLoader)
    except _Refused as exc:
        raise SpecError("", f"{where}: {exc.reason} (line {exc.mark.line + 1}, column {exc.mark.column + 1})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SpecError("", f"{where} is not valid JSON or YAML{at}: {getattr(exc, 'problem', exc)}") from None
    except (ValueError, OverflowError) as exc:  # a value YAML reads but Python cannot hold: a date, a huge number
        raise SpecError("", f"{where} holds a value that cannot be read: {exc}") from None
    if data is None:  # nothing, comments, or a bare null
        raise SpecError("", f"{where} is empty: it holds no JSON or YAML value")
    _check_shape(data, where)
    return data


def _check_shape(data: Any, where: str = "job") -> None:
    """Mappings with text keys, lists and scalars, nested at most MAX_NESTING deep (checked without
    recursion: the parsers and converters after this recurse)."""
    stack = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)) and depth > MAX_NESTING:
            raise SpecError("", f"{where} is nested deeper than {MAX_NESTING} levels")
        if isinstance(item, dict):
            for key, value in item.items():
                if not isinstance(key, str):
                    raise SpecError("", f"{where}: the key {key!r} is not text; quote it")
                stack.append((value, depth + 1))
        elif isinstance(item, list):
            stack.extend((value, depth + 1) for value in item)


def _checked(job: JobSpec, prefix: str, base_field: str = "") -> JobSpec:
    """`job` with its Cloud Storage paths normalised; one that leaves its bucket is a SpecError naming
    the field as the job's format wrote it (`prefix`: where the CustomJobSpec is; a legacy job's
    are its trainingInput's `jobDir` and `packageUris`)."""
    legacy = job.legacy is not None
    if job.legacy and job.legacy.job_dir.startswith("gs://"):
        job.legacy.job_dir = normalise_uri(job.legacy.job_dir, "trainingInput.jobDir")
    base = job.spec.base_output_directory
    if base.output_uri_prefix.startswith("gs://"):
        where = base_field or f"{prefix}baseOutputDirectory.outputUriPrefix"
        base.output_uri_prefix = normalise_uri(base.output_uri_prefix, where)
    for pos, pool in job.pools:
        if "python_package_spec" not in pool:
            continue
        uris = pool.python_package_spec.package_uris
        for n, uri in enumerate(uris):
            if uri.startswith("gs://"):
                where = f"trainingInput.packageUris[{n}]" if legacy else \
                    f"{prefix}workerPoolSpecs[{pos}].pythonPackageSpec.packageUris[{n}]"
                uris[n] = normalise_uri(uri, where)
    return job


# ---- parsing ---------------------------------------------------------------


def _looks_like_path(text: str) -> bool:
    stripped = text.strip()
    return "\n" not in stripped and stripped[:1] not in "{[" and ": " not in stripped


def _name_from_path(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", path.stem).strip("-") or "job"


def _has(data: dict[str, Any], camel: str) -> bool:
    return camel in data or _snake(camel) in data


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def parse_message(data: Any, message_type: Any, prefix: str = "") -> Any:
    """Parse proto3 JSON (either key style) into a v1 message of `message_type`; a mistake is one SpecError
    naming its full path under `prefix` (`workerPoolSpecs[0].containerSpec.args[1]`) in the user's words."""
    pb = message_type.pb()()
    # keys and shape first: protobuf keeps the last of a field given twice (`imageUri` and `image_uri`), and its
    # parser fails on some shapes (a text where a message goes) with a SystemError
    if problem := _json_problem(data, pb.DESCRIPTOR, prefix, values=False):
        raise SpecError(*problem)
    try:
        json_format.ParseDict(data, pb)
    except (json_format.ParseError, TypeError, AttributeError, ValueError) as exc:
        # protobuf's text names the path only sometimes, and in Python's words: find the value it refused
        path, reason = _json_problem(data, pb.DESCRIPTOR, prefix) or (prefix, _protobuf_reason(str(exc)))
        raise SpecError(path, reason) from None
    if unknown := unknown_enum_value(pb, prefix):
        raise SpecError(*unknown)
    return message_type.wrap(pb)


def _json_problem(data: Any, message: Any, path: str, values: bool = True) -> tuple[str, str] | None:
    """The first value of `data`, proto3 JSON for the message type `message`, that protobuf's parser
    refuses, as (its path, why): an unknown or repeated key, a value of the wrong kind or one out of range
    (without `values`, only the keys and the shape are checked: each scalar is left unparsed)."""
    if not isinstance(data, dict):
        fields = ", ".join(f.json_name for f in message.fields[:2])
        return path, f"expected a mapping ({fields}, ...), not {_kind(data)}"
    fields = {f.json_name: f for f in message.fields} | {f.name: f for f in message.fields}
    given: dict[str, str] = {}  # a field's or a oneof's name -> the key that set it
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            return path, f"unknown field {key!r}"
        where = f"{path}.{field.json_name}" if path else field.json_name
        oneof = field.containing_oneof if value is not None else None
        if field.name in given:
            return where, f"given twice, as {given[field.name]} and as {key}; keep one"
        if oneof and oneof.name in given:
            return path, f"give only one of {' or '.join(f.json_name for f in oneof.fields)}"
        given[field.name] = key
        if oneof:
            given[oneof.name] = key
        if value is None:  # proto3 JSON: the field's default
            continue
        if field.message_type and field.message_type.GetOptions().map_entry:
            if not isinstance(value, dict):
                return where, f"expected a mapping, not {_kind(value)}"
            entry = field.message_type.fields_by_name["value"]
            items = [(f"{where}[{k!r}]", v) for k, v in value.items()]
        elif field.is_repeated:
            if not isinstance(value, list):
                return where, f"expected a list, not {_kind(value)}"
            entry, items = field, [(f"{where}[{i}]", v) for i, v in enumerate(value)]
        else:
            entry, items = field, [(where, value)]
        for item_path, item in items:
            if problem := _value_problem(item, entry, item_path, values):
                return problem
    return None


def _value_problem(value: Any, field: Any, where: str, values: bool) -> tuple[str, str] | None:
    """(where, why) if protobuf refuses `value` for one value of `field`, else None."""
    if value is None:
        return where, "null is not allowed here; remove it or give a value"
    if field.message_type and not field.message_type.full_name.startswith("google.protobuf."):
        return _json_problem(value, field.message_type, where, values)
    if not values:
        return None
    # a scalar, or a well-known type written as one (a Duration is "3600s"): protobuf's own rules decide
    holder = message_factory.GetMessageClass(field.containing_type)()
    try:
        json_format.ParseDict({field.name: [value] if field.is_repeated else value}, holder)
    except (json_format.ParseError, TypeError, AttributeError, ValueError) as exc:
        return where, _scalar_reason(value, field, str(exc))
    return None


def _scalar_reason(value: Any, field: Any, text: str) -> str:
    """Why protobuf refused `value` for `field` (its error `text`), in the words of JSON and YAML."""
    kind = field.type
    if kind in (field.TYPE_STRING, field.TYPE_BYTES) and not isinstance(value, str):
        return _not_text(value)
    if field.enum_type is not None:
        names = ", ".join(v.name for v in field.enum_type.values[1:])
        if isinstance(value, str):
            return f"invalid value {value!r} (valid: {names})"
        return f"expected one of {names}, not {_kind(value)}"
    if kind == field.TYPE_BOOL:
        return f"must be true or false{' (without quotes)' if isinstance(value, str) else ''}, not {_kind(value)}"
    if field.cpp_type in _INTEGER_TYPES:
        if "out of range" in text:
            return f"{value} is out of range"
        return f"not a whole number: {value!r}"
    if kind in (field.TYPE_DOUBLE, field.TYPE_FLOAT):
        return f"not a number: {value!r}"
    if field.message_type is not None and field.message_type.full_name == "google.protobuf.Duration":
        return f'expected a duration in seconds such as "3600s", not {value!r}'
    return _protobuf_reason(text)


_INTEGER_TYPES = {FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT32,
                  FieldDescriptor.CPPTYPE_UINT64}


def _not_text(value: Any) -> str:
    """Why a value YAML or JSON typed (`5`, `true`, `2024-01-02`, `!!binary`) is not the text a field takes."""
    if isinstance(value, bytes):
        return "binary data (YAML !!binary) is not text; write the text itself"
    if isinstance(value, bool):
        what, shown = "true or false", str(value).lower()
    elif isinstance(value, (int, float)):
        what, shown = "a number", str(value)
    elif isinstance(value, datetime.datetime):
        what, shown = "a date and time", value.isoformat()
    elif isinstance(value, datetime.date):
        what, shown = "a date", value.isoformat()
    else:
        return f"expected text, not {_kind(value)}"
    return f'{shown} is {what}; write it as text ("{shown}")'


def _protobuf_reason(text: str) -> str:
    """protobuf's ParseError text without its nesting ("Failed to parse x field: ...") and location."""
    reason = re.sub(r"^(Failed to parse \w+ field: )+", "", text).split(" at ")[0].split("\n")[0].rstrip(".")
    return f"cannot be read: {reason}"


def unknown_enum_value(message: Any, path: str = "") -> tuple[str, str] | None:
    """The first enum field of a protobuf message holding a number its enum does not name, as (path,
    reason). proto3 JSON parses any number into an enum field; proto-plus reads it back as a bare int
    with a warning, and what Vertex AI answers is not known (data/SOURCES.md, "UNCONFIRMED (continued)" 11)."""
    for descriptor, value in message.ListFields():
        where = f"{path}.{descriptor.json_name}" if path else descriptor.json_name
        if descriptor.enum_type is not None:
            for number in value if descriptor.is_repeated else [value]:
                if number not in descriptor.enum_type.values_by_number:
                    names = ", ".join(v.name for v in descriptor.enum_type.values[1:])
                    return where, f"invalid value {number} (valid: {names})"
        elif descriptor.message_type is not None:
            if descriptor.message_type.GetOptions().map_entry:
                items = value.items() if descriptor.message_type.fields_by_name["value"].message_type else []
                children = [(f"{where}[{key!r}]", item) for key, item in items]
            else:
                children = [(f"{where}[{i}]", item) for i, item in enumerate(value)] if descriptor.is_repeated \
                    else [(where, value)]
            for child_path, child in children:
                if found := unknown_enum_value(child, child_path):
                    return found
    return None


def _kind(value: Any) -> str:
    """What a value is, in the words of JSON and YAML."""
    kinds = {dict: "a mapping", list: "a list", str: "text", bool: "true or false", type(None): "null",
             int: "a number", float: "a number"}
    return kinds.get(type(value), f"a {type(value).__name__}")


def _parse_spec(data: dict[str, Any], prefix: str) -> v1.CustomJobSpec:
    return parse_message(data, v1.CustomJobSpec, prefix)


# CustomJob.run() keywords that set Scheduling fields (google-cloud-aiplatform 2.7,
# inspect.signature(CustomJob.run) and its submit()) -> the field. There `timeout` and `max_wait_duration`
# are whole seconds (timeout 0 or None: the default, 7 days; max_wait_duration 0: wait for ever, None: the
# default) and `scheduling_strategy` is a Scheduling.Strategy (here its name, or its number). run()'s other
# keywords that are job fields (service_account, network, enable_web_access, tensorboard,
# persistent_resource_id, experiment) have the CustomJobSpec's own names, so the SDK form takes them as
# they are, as it does reserved_ip_ranges and enable_dashboard_access (CustomJobSpec fields run() lacks).
SDK_SCHEDULING = {"timeout": "timeout", "scheduling_strategy": "strategy",
                  "max_wait_duration": "max_wait_duration",
                  "restart_job_on_worker_restart": "restart_job_on_worker_restart",
                  "disable_retries": "disable_retries"}
_SDK_SECONDS = ("timeout", "max_wait_duration")


def _from_sdk(data: dict[str, Any], display_name: str | None) -> JobSpec:
    rest = dict(data)
    name = _text(rest.pop("display_name", None), "display_name") or display_name or "job"
    labels = _labels(rest.pop("labels", None), "labels")
    base = _text(rest.pop("base_output_dir", None), "base_output_dir")
    key = _text(rest.pop("encryption_spec_key_name", None), "encryption_spec_key_name")
    _sdk_scheduling(rest)
    spec = _parse_spec(rest, "")
    if base:
        spec.base_output_directory.output_uri_prefix = base
    return JobSpec(name, spec, labels, encryption_spec=v1.EncryptionSpec(kms_key_name=key))


def _sdk_scheduling(rest: dict[str, Any]) -> None:
    """Move the run() scheduling keywords of an SDK form (SDK_SCHEDULING) into its `scheduling`, with the
    SDK's meaning; each mistake is one SpecError naming the keyword."""
    given = {key: rest.pop(key) for key in SDK_SCHEDULING if key in rest}
    if not given:
        return
    scheduling = rest.get("scheduling", {})
    if scheduling is None:
        scheduling = {}
    if not isinstance(scheduling, dict):
        raise SpecError("scheduling", f"must be a mapping, not {_kind(scheduling)}")
    scheduling = dict(scheduling)
    for key, value in given.items():
        name = SDK_SCHEDULING[key]
        if _has(scheduling, _camel(name)):
            raise SpecError(key, f"given twice, as {key} and as scheduling.{_camel(name)}; keep one")
        if value is None:
            continue  # run()'s default
        if key in _SDK_SECONDS:
            if isinstance(value, bool) or not isinstance(value, int):
                shown = repr(value) if isinstance(value, float) else _kind(value)
                raise SpecError(key, f"must be a whole number of seconds (as CustomJob.run() takes it), not {shown}")
            if value < 0:
                raise SpecError(key, f"must not be negative ({value})")
            if value or key == "max_wait_duration":  # run() leaves a timeout of 0 unset; a wait of 0 is for ever
                scheduling[name] = f"{value}s"
        elif key == "scheduling_strategy":
            scheduling[name] = _sdk_strategy(value, key)
        else:
            if not isinstance(value, bool):
                raise SpecError(key, f"must be true or false, not {_kind(value)}")
            if value:
                scheduling[name] = True
    if scheduling:
        rest["scheduling"] = scheduling


def _sdk_strategy(value: Any, where: str) -> str:
    """A Scheduling.Strategy given by name or number, as its name."""
    strategies = v1.Scheduling.Strategy
    if isinstance(value, str) and value in strategies.__members__:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value in {s.value for s in strategies}:
        return strategies(value).name
    names = [s.name for s in strategies][1:]
    raise SpecError(where, f"invalid value {value!r} (valid: {', '.join(names)})")


def _text(value: Any, where: str, numbers: bool = False) -> str:
    """A text field ("" when absent); with `numbers`, a number is taken as its text (YAML `jobId: 123`)."""
    if value is None or isinstance(value, str):
        return value or ""
    if numbers and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise SpecError(where, f"must be text, not {_kind(value)}")


def _labels(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise SpecError(where, "must be a mapping of text to text")
    return dict(value)


def _to_sdk(job: JobSpec) -> dict[str, Any]:
    spec = job.custom_job_spec()
    body = _ints(json_format.MessageToDict(spec._pb, preserving_proto_field_name=True))
    out: dict[str, Any] = {"display_name": job.display_name, "worker_pool_specs": body.pop("worker_pool_specs", [])}
    if base := body.pop("base_output_directory", {}).get("output_uri_prefix"):
        out["base_output_dir"] = base
    if job.labels:
        out["labels"] = dict(job.labels)
    if job.encryption_spec.kms_key_name:
        out["encryption_spec_key_name"] = job.encryption_spec.kms_key_name
    scheduling = body.pop("scheduling", {})
    out.update(body)
    for key, name in SDK_SCHEDULING.items():  # as CustomJob.run() takes them
        if name not in scheduling:
            continue
        value = scheduling[name]
        if key in _SDK_SECONDS:
            value = _whole_seconds(value)
            if value is None or (key == "timeout" and value == 0):
                continue  # run() cannot say it (a fraction of a second, a negative or zero timeout): kept below
        out[key] = value
        del scheduling[name]
    if scheduling:
        out["scheduling"] = scheduling
    return out


def _whole_seconds(duration: str) -> int | None:
    """A proto3 JSON Duration ("3600s") as whole seconds; None for a fraction or a negative."""
    return int(duration[:-1]) if re.fullmatch(r"\d+s", duration) else None


def _ints(data: Any) -> Any:
    """replicaCount is int64, a JSON string in proto3; configs read better with numbers."""
    if isinstance(data, dict):
        return {k: int(v) if k in ("replicaCount", "replica_count") else _ints(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_ints(v) for v in data]
    return data


# ---- legacy AI Platform trainingInput -------------------------------------

def _camel_keys(data: Any) -> Any:
    if isinstance(data, dict):
        return {_camel(k): _camel_keys(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_camel_keys(v) for v in data]
    return data


def _from_legacy(data: dict[str, Any], display_name: str | None) -> JobSpec:
    labels = _labels(data.get("labels"), "labels")  # label keys are the user's own: never re-cased
    data = {_camel(k): v for k, v in data.items() if k != "labels"}
    # a bare trainingInput (a gcloud config.yaml) may have the jobId beside its fields
    ti = _camel_keys(data["trainingInput"] if "trainingInput" in data else
                     {k: v for k, v in data.items() if k != "jobId"})
    where = "trainingInput"
    if not isinstance(ti, dict):
        raise SpecError(where, "must be a mapping")
    _check_legacy_fields(ti, where)
    for key in ("jobDir", "pythonModule", "region", "runtimeVersion", "pythonVersion",
                *(f"{role}Type" for role in LEGACY_ROLES)):
        _text(ti.get(key), f"{where}.{key}", numbers=key in ("runtimeVersion", "pythonVersion"))
    tier = _scale_tier(ti.get("scaleTier"), f"{where}.scaleTier") or ("CUSTOM" if "masterType" in ti else "BASIC")
    if tier == "BASIC":
        master_type = ti.get("masterType") or "standard"
    elif tier == "CUSTOM":
        master_type = ti.get("masterType")
        if not master_type:
            raise SpecError(f"{where}.masterType", "required when scaleTier is CUSTOM")
    else:
        raise SpecError(f"{where}.scaleTier", f"{tier} is not supported (its machines are not published); use "
                                               "CUSTOM with masterType, workerCount and parameterServerCount, or BASIC")
    master_image = (ti.get("masterConfig") or {}).get("imageUri", "")
    pools: list[dict[str, Any]] = []
    for pos, role in enumerate(LEGACY_ROLES):
        count = 1 if pos == 0 else _count(ti, role, where)
        if count == 0 or (pos > 0 and tier == "BASIC"):
            pools.append({})
            continue
        mtype = master_type if pos == 0 else ti.get(f"{role}Type")
        if not mtype:  # AI Platform's rule (TrainingInput in google/cloud/ml/v1/job_service.proto)
            raise SpecError(f"{where}.{role}Type", f"required when {role}Count is more than 0 (scaleTier CUSTOM)")
        pools.append(_legacy_pool(ti, role, mtype, count, master_image, f"{where}.{role}Config"))
    while len(pools) > 1 and not pools[-1]:
        pools.pop()
    spec = _parse_spec({"workerPoolSpecs": pools, **_legacy_spec_fields(ti, where)}, where)
    # a gcloud config.yaml has no jobId: make one from the file name that follows AI Platform's rules
    job_id = _text(data.get("jobId"), "jobId", numbers=True) or re.sub(
        r"^(?![A-Za-z])", "job_", re.sub(r"\W", "_", display_name or "job"))
    legacy = LegacyOptions(job_id, bool(ti.get("useChiefInTfConfig", False)), str(ti.get("jobDir") or ""),
                           *(str(ti.get(k) or "") for k in ("region", "runtimeVersion", "pythonVersion")))
    tuning = None
    if ti.get("hyperparameters") is not None:
        from .tuning.params import from_legacy_hyperparameters  # imported here: the tuning package imports spec

        tuning = from_legacy_hyperparameters(ti["hyperparameters"], f"{where}.hyperparameters")
    key = str((ti.get("encryptionConfig") or {}).get("kmsKeyName") or "")
    return JobSpec(job_id, spec, dict(labels), legacy, encryption_spec=v1.EncryptionSpec(kms_key_name=key),
                   tuning=tuning)


def _scale_tier(value: Any, where: str) -> str:
    """A trainingInput's scaleTier, given by name or by number, as its name ("" when absent)."""
    if isinstance(value, int) and not isinstance(value, bool) or isinstance(value, str) and value.isdecimal():
        if int(value) in _LEGACY_SCALE_TIERS:
            return _LEGACY_SCALE_TIERS[int(value)]
        numbers = ", ".join(f"{number} {name}" for number, name in _LEGACY_SCALE_TIERS.items())
        raise SpecError(where, f"invalid value {value}: write the tier's name (its number is not known here; "
                               f"known: {numbers})")
    tier = _text(value, where).upper()
    if tier and tier not in _LEGACY_TIER_NAMES:
        raise SpecError(where, f"invalid value {value!r} (valid: {', '.join(_LEGACY_TIER_NAMES)})")
    return tier


def _check_legacy_fields(ti: Any, where: str) -> None:
    """Every key is an AI Platform field that maps to Vertex; else one SpecError naming it."""
    _known(ti, _LEGACY_FIELDS, where)
    _known(ti.get("scheduling"), {"maxRunningTime"}, f"{where}.scheduling")
    _known(ti.get("encryptionConfig"), {"kmsKeyName"}, f"{where}.encryptionConfig")
    for role in LEGACY_ROLES:
        cfg = _known(ti.get(f"{role}Config"), _REPLICA_CONFIG_FIELDS, f"{where}.{role}Config")
        _known(cfg.get("acceleratorConfig"), {"count", "type"}, f"{where}.{role}Config.acceleratorConfig")
        _known(cfg.get("diskConfig"), {"bootDiskType", "bootDiskSizeGb"}, f"{where}.{role}Config.diskConfig")


def _known(data: Any, fields: set[str], where: str) -> dict[str, Any]:
    """`data` (None: empty) if it is a mapping of `fields`; a refused or unknown key is a SpecError."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(where, "must be a mapping")
    for key in data:
        path = f"{where}.{key}"
        why = next((why for name, why in _LEGACY_REFUSED.items() if path.endswith(f".{name}")), None)
        if why:
            raise SpecError(path, why)
        if key not in fields:
            raise SpecError(where, f"unknown field {key!r}")
    return data


def _legacy_spec_fields(ti: dict[str, Any], where: str) -> dict[str, Any]:
    """The CustomJobSpec fields (REST JSON) a trainingInput sets beyond its pools."""
    out = {key: ti[key] for key in ("serviceAccount", "network", "enableWebAccess") if key in ti}
    if "maxRunningTime" in (ti.get("scheduling") or {}):
        timeout = ti["scheduling"]["maxRunningTime"]
        try:
            parse_message({"timeout": timeout}, v1.Scheduling)
        except SpecError as exc:  # name the field the user wrote
            raise SpecError(f"{where}.scheduling.maxRunningTime", exc.message) from None
        out["scheduling"] = {"timeout": timeout}
    return out


def _count(ti: dict[str, Any], role: str, where: str) -> int:
    raw = ti.get(f"{role}Count", 0)
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise SpecError(f"{where}.{role}Count", f"not a whole number: {raw!r}") from None


def _legacy_pool(ti: dict[str, Any], role: str, mtype: str, count: int, master_image: str,
                 where: str) -> dict[str, Any]:
    cfg = ti.get(f"{role}Config") or {}
    machine, gpu, gpus = LEGACY_MACHINES.get(mtype, (mtype, "", 0))
    accel = cfg.get("acceleratorConfig") or {}
    kind = accel.get("type")
    if kind is not None and str(kind) not in v1.AcceleratorType.__members__:
        names = ", ".join(list(v1.AcceleratorType.__members__)[1:])
        # AI Platform numbered its AcceleratorType apart from Vertex AI; its numbers are published nowhere found
        why = "write the accelerator's name (AI Platform's number for it is not known here)" \
            if isinstance(kind, int) and not isinstance(kind, bool) else ""
        raise SpecError(f"{where}.acceleratorConfig.type",
                        f"invalid value {kind!r}{': ' + why if why else ''} (valid: {names})")
    machine_spec: dict[str, Any] = {"machineType": machine}
    if accel or gpu:
        machine_spec["acceleratorType"] = accel.get("type", gpu)
        machine_spec["acceleratorCount"] = accel.get("count", gpus)
    pool: dict[str, Any] = {"machineSpec": machine_spec, "replicaCount": count}
    if disk := cfg.get("diskConfig"):
        pool["diskSpec"] = {k: v for k, v in disk.items() if k in ("bootDiskType", "bootDiskSizeGb")}
    args = list(cfg.get("containerArgs") or ti.get("args") or [])
    image = cfg.get("imageUri") or master_image
    if image:
        container: dict[str, Any] = {"imageUri": image, "args": args}
        if cfg.get("containerCommand"):
            container["command"] = list(cfg["containerCommand"])
        pool["containerSpec"] = container
    elif ti.get("pythonModule"):
        pool["pythonPackageSpec"] = {
            "executorImageUri": _runtime_image(str(ti.get("runtimeVersion") or _DEFAULT_RUNTIME),
                                               bool(gpus or accel)),
            "packageUris": list(ti.get("packageUris") or []),
            "pythonModule": ti["pythonModule"],
            "args": args,
        }
    else:
        raise SpecError(f"{where}.imageUri", "required: give masterConfig.imageUri (custom container) "
                                              "or pythonModule and packageUris (runtime version)")
    return pool


_NO_LEGACY_WHY = "AI Platform's trainingInput has no equivalent; write the job as rest, gcloud or sdk instead"


def _check_legacy_dump(job: JobSpec) -> None:
    """One SpecError naming the first field AI Platform's trainingInput has no equivalent for."""
    body = message_to_dict(job.spec)  # default values (STANDARD unset, False, empty) are left out
    for path in _NO_LEGACY:
        head, _, leaf = path.rpartition(".")
        if leaf in (body.get(head, {}) if head else body):
            raise SpecError(path, _NO_LEGACY_WHY)
    pools = body.get("workerPoolSpecs", [])
    if len(pools) > len(LEGACY_ROLES):
        raise SpecError(f"workerPoolSpecs[{len(LEGACY_ROLES)}]", _NO_LEGACY_WHY)
    if int(pools[0].get("replicaCount", 1) if pools else 1) > 1:
        raise SpecError("workerPoolSpecs[0].replicaCount", "AI Platform's trainingInput has one master replica; "
                                                           "write the job as rest, gcloud or sdk instead")
    package: tuple[int, dict[str, Any]] | None = None  # the first pool running a Python package
    for pos, pool in enumerate(pools):
        for key in _NO_LEGACY_MACHINE:
            if key in pool.get("machineSpec", {}):
                raise SpecError(f"workerPoolSpecs[{pos}].machineSpec.{key}", _NO_LEGACY_WHY)
        for task in ("containerSpec", "pythonPackageSpec"):
            if "env" in pool.get(task, {}):
                raise SpecError(f"workerPoolSpecs[{pos}].{task}.env", _NO_LEGACY_WHY)
        if "pythonPackageSpec" not in pool:
            continue
        package = package or (pos, pool["pythonPackageSpec"])
        for key in ("pythonModule", "packageUris", "args"):  # a trainingInput holds each once, for every replica
            if pool["pythonPackageSpec"].get(key) != package[1].get(key):
                raise SpecError(f"workerPoolSpecs[{pos}].pythonPackageSpec.{key}",
                                f"differs from workerPoolSpecs[{package[0]}]'s, and AI Platform's trainingInput "
                                f"has one {key} for every replica; write the job as rest, gcloud or sdk instead")


def _legacy_spec(job: JobSpec) -> tuple[v1.CustomJobSpec, str]:
    """The job's spec and jobDir as a trainingInput holds them. Reading a jobDir passes `--job-dir DIR` to every
    replica and makes DIR the base output directory (`custom_job_spec`), so a base output directory is a jobDir
    when every replica's args end with that flag (taken off here); else it is refused, one line."""
    spec = v1.CustomJobSpec.wrap(copy.deepcopy(job.spec._pb))
    base = spec.base_output_directory.output_uri_prefix
    job_dir = job.legacy.job_dir if job.legacy else ""
    where = "baseOutputDirectory.outputUriPrefix"
    if job_dir or not base:
        if base and base != job_dir:
            raise SpecError(where, f"differs from the jobDir ({job_dir}), a trainingInput's only output folder; "
                                   "write the job as rest, gcloud or sdk instead")
        return spec, job_dir
    for pos, pool in _existing(spec):
        args = _pool_args(pool)
        if list(args[-2:]) != ["--job-dir", base]:
            raise SpecError(where, f"a trainingInput holds it only as jobDir, which also passes --job-dir {base} to "
                                   f"every replica: end each pool's args with those two to keep it (workerPoolSpecs"
                                   f"[{pos}]'s do not), or write the job as rest, gcloud or sdk instead")
        del args[-2:]
    spec._pb.ClearField("base_output_directory")
    return spec, base


def _legacy_runtime(spec: v1.CustomJobSpec, given: str) -> str:
    """The runtimeVersion (`given`, else read from the images) whose images (`_runtime_image`) the package pools
    run; one SpecError naming the first pool whose image no runtime version gives."""
    version = given
    for pos, pool in _existing(spec):
        if "python_package_spec" not in pool:
            continue
        image = pool.python_package_spec.executor_image_uri
        if not version:
            m = re.fullmatch(rf"{re.escape(PREBUILT_TRAINING)}/tf-(?:cpu|gpu)\.(\d+)-(\d+):latest", image)
            version = f"{m[1]}.{m[2]}" if m else _DEFAULT_RUNTIME
        expected = _runtime_image(version, bool(pool.machine_spec.accelerator_count))
        if image != expected:
            gives = f"its runtimeVersion {given} gives {expected}" if given else \
                f"a runtimeVersion gives only {_runtime_image('M.N', False)} (tf-gpu with accelerators)"
            raise SpecError(f"workerPoolSpecs[{pos}].pythonPackageSpec.executorImageUri",
                            f"AI Platform's trainingInput has no image for a Python package: {gives}; write the "
                            "job as rest, gcloud or sdk instead")
    return version


def _runtime_image(runtime: str, gpu: bool) -> str:
    """AI Platform runtime versions have no image; the workbench's choice is the
    prebuilt TensorFlow training image of the same version."""
    version = runtime.replace(".", "-")
    return f"{PREBUILT_TRAINING}/tf-{'gpu' if gpu else 'cpu'}.{version}:latest"


def _to_legacy(job: JobSpec) -> dict[str, Any]:
    _check_legacy_dump(job)
    spec, job_dir = _legacy_spec(job)
    legacy = job.legacy or LegacyOptions(re.sub(r"\W", "_", job.display_name))
    runtime = _legacy_runtime(spec, legacy.runtime_version)
    spec_pools = list(spec.worker_pool_specs) + [v1.WorkerPoolSpec()] * 4
    master = spec_pools[0]
    master_image = master.container_spec.image_uri if "container_spec" in master else ""
    ti: dict[str, Any] = {"scaleTier": "CUSTOM"}
    for pos, role in enumerate(LEGACY_ROLES):
        pool = spec_pools[pos]
        if is_empty_pool(pool):
            continue
        ms = pool.machine_spec
        if not ms.machine_type:
            raise SpecError(f"workerPoolSpecs[{pos}].machineSpec.machineType", "required: AI Platform's trainingInput "
                                                                              "names each role's machine")
        ti[f"{role}Type"] = ms.machine_type
        if pos:
            ti[f"{role}Count"] = str(pool.replica_count)
        cfg: dict[str, Any] = {}
        if ms.accelerator_count:
            cfg["acceleratorConfig"] = {"count": str(ms.accelerator_count), "type": ms.accelerator_type.name}
        if "container_spec" in pool:
            if pos == 0 or pool.container_spec.image_uri != master_image:
                cfg["imageUri"] = pool.container_spec.image_uri
            if pool.container_spec.command:
                cfg["containerCommand"] = list(pool.container_spec.command)
            if pool.container_spec.args:
                cfg["containerArgs"] = list(pool.container_spec.args)
        else:
            pps = pool.python_package_spec
            ti["pythonModule"], ti["packageUris"] = pps.python_module, list(pps.package_uris)
            if pps.args:
                ti["args"] = list(pps.args)
        if "disk_spec" in pool:
            cfg["diskConfig"] = json_format.MessageToDict(pool.disk_spec._pb)
        if cfg:
            ti[f"{role}Config"] = cfg
    if legacy.use_chief_in_tf_config:
        ti["useChiefInTfConfig"] = True
    for key, value in (("jobDir", job_dir), ("region", legacy.region),
                       ("runtimeVersion", runtime if legacy.runtime_version or runtime != _DEFAULT_RUNTIME else ""),
                       ("pythonVersion", legacy.python_version),
                       ("serviceAccount", job.spec.service_account), ("network", job.spec.network),
                       ("enableWebAccess", job.spec.enable_web_access)):
        if value:
            ti[key] = value
    if "timeout" in job.spec.scheduling:
        ti["scheduling"] = {"maxRunningTime": message_to_dict(job.spec.scheduling)["timeout"]}
    if job.encryption_spec.kms_key_name:
        ti["encryptionConfig"] = {"kmsKeyName": job.encryption_spec.kms_key_name}
    if job.tuning is not None:
        from .tuning.params import to_legacy_hyperparameters  # imported here: the tuning package imports spec

        ti["hyperparameters"] = to_legacy_hyperparameters(job.tuning)
    out: dict[str, Any] = {"jobId": legacy.job_id, "trainingInput": ti}
    if job.labels:
        out["labels"] = dict(job.labels)
    # whatever the checks above missed: reading the trainingInput back must give the job that was written
    changed = _first_difference(message_to_dict(job.custom_job_spec()),
                                message_to_dict(_from_legacy(out, None).custom_job_spec()))
    if changed is not None:
        raise SpecError(changed, "AI Platform's trainingInput cannot hold it as it is; write the job as rest, "
                                 "gcloud or sdk instead")
    return out


def _first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The path of the first value that differs between two JSON values, None when they are equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            if (found := _first_difference(a.get(key), b.get(key), f"{path}.{key}" if path else key)) is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if (found := _first_difference(x, y, f"{path}[{i}]")) is not None:
                return found
        return None
    return None if a == b else path
