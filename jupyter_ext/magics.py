"""`%%vertex_train` and the line magics `%vertex_jobs`, `%vertex_logs`, `%vertex_cancel`.

Thin by design: flags are parsed here, the job is built by the core
(`cell`, `packaging`, `images`), launched through `launch`, and shown by the
widgets. A user's mistake is a `UsageError` with one line, never a traceback.
"""

from __future__ import annotations

import keyword
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from . import catalog, environment, limits, scheduling, states, waiting
from .errors import WorkbenchError, client_error_message
from .sensitive import mask_urls
from .names import DEFAULT_BACKEND, MAX_FAILED_HELP, STAGING_BUCKET_FLAG, TARGET_FLAGS, TUNING_PARALLEL, TUNING_TRIALS

if TYPE_CHECKING:  # the client library loads when a magic first runs, not at %load_ext
    from . import launch
    from .spec import JobSpec

ENDED_JOB_WAIT = 60.0  # seconds %vertex_logs waits for an ended job's log, to keep it in the saved notebook
_COUNT = limits.at_least(0)  # replicas of a pool, failed trials
JOB_COLUMNS = ["id", "display_name", "state", "replicas", "create_time", "start_time", "end_time"]


@dataclass
class _Shown:
    """A launched job the cell waits for: its handle, its live view and where that is displayed."""

    handle: Any
    view: Any  # a JobMonitor or TuningMonitor
    display: Any  # the DisplayHandle (None outside a notebook)
    stop_hint: str  # how to stop the job once the cell stopped waiting


_TARGET_ARGUMENTS = [argument(flag, **options) for flag, options in TARGET_FLAGS.items()]  # as `vtrain`'s


def _target_arguments(func: Any) -> Any:
    for decorator in reversed(_TARGET_ARGUMENTS):
        func = decorator(func)
    return func


def _scheduling_arguments(func: Any) -> Any:
    """The "Scheduling & access" flags, as `vtrain run/submit` have them (`scheduling.FLAGS`)."""
    for key, (flag, _field, kwargs) in reversed(scheduling.FLAGS.items()):
        func = argument(flag, dest=key, default=None, **kwargs)(func)
    return func


def _job_arguments(func: Any) -> Any:
    """A job (ID or resource name) and where it is."""
    for decorator in reversed([argument("job", help="job ID or resource name"), *_TARGET_ARGUMENTS]):
        func = decorator(func)
    return func


@magics_class
class VertexTrainMagics(Magics):
    monitor: Any = None  # the last job view shown

    @magic_arguments()
    @argument("destination", nargs="?", help="a variable that receives the job handle")
    @argument("--config", metavar="VAR", help="the pool layout: a PoolConfigurator, a JobSpec, a job dict, or a "
              "job file path, from a variable of the notebook (or a path)")
    @argument("--workers", type=_COUNT, default=0, metavar="N", help="worker replicas (pool 1)")
    @argument("--machine-type", default=catalog.DEFAULT_MACHINE, metavar="TYPE", help="machine type of every pool")
    @argument("--accelerator", default="", metavar="TYPE:COUNT", help="GPUs on the primary and the workers, "
              "e.g. NVIDIA_TESLA_T4:1")
    @argument("--ps", type=_COUNT, default=0, metavar="N", help="parameter server replicas (pool 2)")
    @argument("--evaluators", type=_COUNT, default=0, metavar="N", help="evaluator replicas (pool 3)")
    @argument("--reduction-server", type=_COUNT, default=0, metavar="N", help="Reduction Server replicas (pool 2)")
    @argument("--tpu", default="", metavar="SPEC", help="a TPU job: cloud-tpu:TPU_V3:8 or ct5lp-hightpu-4t:2x2")
    @argument("--name", default="vertex-train", help="the job's display name")
    @argument("--base-image", metavar="IMAGE", help="the image the trainer builds on: tf, tf-gpu, pytorch-gpu, "
              "sklearn, xgboost (with a version, e.g. tf-cpu.2-17) or any image reference")
    @argument("--requirements", nargs="+", metavar="PKG", help="pip requirements of the trainer")
    @argument("--args", default="", metavar='"ARGS"', help="command-line arguments for the trainer, quoted")
    @argument("--env", action="append", metavar="NAME[=VALUE]", help="an environment variable for every replica "
              "(repeatable; NAME alone: this kernel's value); it goes into the job's env, so Vertex AI gets it too. "
              "Nothing else of this machine's environment reaches a replica")
    @argument("--job-dir", metavar="DIR", help="base output directory (AIP_MODEL_DIR etc. go under it)")
    @argument("--local", action="store_true", help="run on this machine (the default)")
    @argument("--backend", default=DEFAULT_BACKEND, help="local replicas as processes (process, the default) or "
              "containers (docker), or a plug-in backend's name")
    @argument(STAGING_BUCKET_FLAG[0], **STAGING_BUCKET_FLAG[1])
    @argument("--image", metavar="URI", help="Vertex AI or docker: where to push the image, e.g. "
              "us-central1-docker.pkg.dev/PROJECT/REPO/trainer")
    @argument("--dry-run", action="store_true", help="show the Dockerfile, the job JSON and every replica's "
              "environment; launch nothing")
    @argument("--show-env-values", action="store_true", help="with --dry-run: show the values of the job's env "
              "(default: NAME=***)")
    @argument("--no-wait", action="store_true", help="return once the job is launched; the monitor keeps following")
    @argument("--tune", metavar='"PARAMS"', help="run a hyperparameter tuning job over these parameters, quoted: "
              '"lr=double:1e-4:1e-1:log, units=int:16:128, optimizer=categorical:adam,sgd" (types: double, int, '
              "categorical, discrete); every trial's replicas get them as --name=value")
    @argument("--metric", metavar="METRIC:GOAL", help="with --tune: the metric the trainer reports with "
              "cloudml-hypertune and its goal, e.g. accuracy:maximize")
    @argument("--trials", type=limits.positive, default=TUNING_TRIALS, metavar="N",
              help=f"with --tune: how many trials (default {TUNING_TRIALS})")
    @argument("--parallel", type=limits.positive, default=TUNING_PARALLEL, metavar="N",
              help=f"with --tune: trials at once (default {TUNING_PARALLEL})")
    @argument("--max-failed", type=_COUNT, default=0, metavar="N", help=f"with --tune: {MAX_FAILED_HELP}")
    @argument("--algorithm", choices=("random", "grid", "bayesian"), help="with --tune: the search (default: "
              "Vertex AI's Bayesian optimization, random search on this machine)")
    @_scheduling_arguments
    @_target_arguments
    @cell_magic
    def vertex_train(self, line: str, cell: str) -> None:
        """Package this cell as the trainer, build it, launch it as a CustomJob, and show it live."""
        args = parse_flags(self.vertex_train, line)
        with _user_errors():
            shown = self._train(args, cell)
        if shown is not None:
            self._ended(shown, waiting.wait(shown.view))

    async def vertex_train_async(self, line: str, cell: str) -> None:
        """`%%vertex_train` in a kernel: the same, waiting so that the job's view stays live (see `waiting`)."""
        args = parse_flags(self.vertex_train, line)
        with _user_errors():
            shown = self._train(args, cell)
        if shown is not None:
            self._ended(shown, await waiting.wait_async(shown.view))

    def _ended(self, shown: _Shown, finished: bool) -> None:
        """After waiting: the final view kept in the notebook; a job that did not succeed fails the cell
        (one line: the job, the replica, how it ended, its log). An interrupt, or the view closed
        before the job ended, left the job running."""
        if finished:
            with _user_errors():  # the service or Vertex AI may not answer: one line, not a traceback
                finished = states.is_final(shown.handle.state)
                failure = shown.handle.failure() if finished else None
        if not finished:
            print(f"stopped waiting; the job goes on ({shown.stop_hint})")
            return
        if shown.display is not None:
            shown.display.update(shown.view)  # the saved notebook keeps the final state and lines
        if failure is not None:
            raise failure

    def _train(self, args: Any, source: str) -> _Shown | None:
        """Build and launch the cell's job; what to wait for, unless the run is a dry run or --no-wait."""
        from . import cell as cells
        from . import launch, packaging

        cells.check_trainer(source)
        if args.show_env_values and not args.dry_run:
            raise WorkbenchError("--show-env-values: only with --dry-run (the monitor never shows env values)")
        study = _study(args)
        job = scheduling.from_args(self._layout(args).with_env(environment.env_flags(args.env)), args)
        if args.job_dir:
            job = cells.with_job_dir(job, args.job_dir)
        target = self._target(args)
        context, folder = cells.context_for(source, requirements=args.requirements, base_image=args.base_image,
                                            job=job, region=packaging.multi_region(target.region))
        trainer_args = cells.split_args(args.args)
        if target.address_style == "process" or (not target.local and not args.image):
            job = cells.for_package(job, folder, context.base_image, trainer_args)  # no image to build
        elif args.dry_run:
            job = cells.for_image(job, args.image or f"<image built from {folder}>", trainer_args)
        else:
            launch.preflight.check(cells.for_image(job, args.image or "", trainer_args), target)  # before building
            job = cells.for_image(job, self._build(args, context, folder, target, job), trainer_args)
        if args.dry_run and not target.local:
            launch.preflight.check(job, target)  # what the real run checks before anything goes
            job = _as_sent(job, target, tuned=study is not None)
        tuning_job = None if study is None else self._tuning_job(args, job, study, target.local)
        if args.dry_run:
            region = target.region if not target.local else launch.target.resolve_region(args.region)
            print(cells.dry_run_text(job, context, target.address_style, region, args.show_env_values,
                                     offered_in=launch.preflight.region_of(target), tuning_job=tuning_job), end="")
            return None
        for note in launch.preflight.notices(job, target):
            print(f"note: {note}")
        if tuning_job is not None:
            return self._tune(tuning_job, target, study, args)
        handle = launch.submit(job, target)
        from widgets.monitor import JobMonitor

        return self._show(args, handle, JobMonitor(handle), f"%vertex_cancel {handle.id}{target.flags()}")

    @staticmethod
    def _tuning_job(args: Any, job: JobSpec, study: Any, local: bool) -> Any:
        """`--tune`: the HyperparameterTuningJob whose trials run the job, checked as the real run checks it."""
        from . import launch, validate

        resource = launch.tuning_request(job, study, max_trials=args.trials, parallel=args.parallel,
                                         max_failed=args.max_failed)
        validate.check_tuning(resource, local=local)
        return resource

    def _tune(self, resource: Any, target: launch.Target, study: Any, args: Any) -> _Shown | None:
        """Create the tuning job, shown live by a TuningMonitor."""
        from widgets.tuning import TuningMonitor

        from . import launch, tuning

        handle = launch.submit_tuning(resource, target)
        for note in tuning.notices(study, local=target.local):
            print(f"note: {note}")
        return self._show(args, handle, TuningMonitor(handle), f"%vertex_cancel {handle.id}{target.flags()}")

    def _show(self, args: Any, handle: launch.Handle, view: Any, stop_hint: str) -> _Shown | None:
        """Give the user the handle and the live view; what to wait for unless --no-wait."""
        if args.destination:
            self.shell.user_ns[args.destination] = handle
        self.monitor = view
        shown = display(view, display_id=True)
        if handle.console_url:
            print(f"Vertex AI console: {handle.console_url}")
        return None if args.no_wait else _Shown(handle, view, shown, stop_hint)

    def _layout(self, args: Any) -> JobSpec:
        from . import cell as cells
        from .spec import JobSpec

        if args.config:
            inline = [flag for flag, value, default in _layout_flags(args) if value != default]
            if inline:
                raise WorkbenchError(f"{', '.join(inline)}: the layout comes from --config; change it there, "
                                     "or drop --config to lay the job out with flags")
            source = self.shell.user_ns.get(args.config, args.config)
            if source is args.config and not os.path.exists(args.config):
                raise WorkbenchError(f"--config: no variable or file named {args.config!r}")
            try:
                job = JobSpec.load(source if isinstance(source, JobSpec) else getattr(source, "spec", source))
            except WorkbenchError as exc:
                raise WorkbenchError(f"--config {args.config}: {exc}") from None
            job.display_name = args.name if args.name != "vertex-train" else job.display_name
            return job
        layout = cells.Layout(args.workers, args.machine_type, args.accelerator, args.ps, args.evaluators,
                              args.reduction_server, args.tpu)
        return cells.layout_job(layout, args.name)

    def _target(self, args: Any) -> launch.Target:
        """Where a magic's jobs are, decided as everywhere else (`Target.resolve`)."""
        from . import launch

        return launch.Target.resolve(vertex=args.vertex, local=getattr(args, "local", False), project=args.project,
                                     region=args.region, staging_bucket=getattr(args, "staging_bucket", None),
                                     endpoint=args.endpoint, access_token_file=args.access_token_file,
                                     backend=getattr(args, "backend", None))

    def _build(self, args: Any, context: Any, folder: Any, target: launch.Target, job: JobSpec) -> str:
        from widgets.build import BuildProgress

        from . import images

        if not target.local and not args.image:
            raise WorkbenchError("--image: Vertex AI runs an image from a registry; name one, e.g. "
                                 "us-central1-docker.pkg.dev/PROJECT/REPO/trainer")
        progress = BuildProgress()
        shown = display(progress, display_id=True)
        try:
            result = images.build_and_push(context, image=args.image, push_image=bool(args.image), context_dir=folder,
                                           on_event=progress.add, platform=catalog.image_platform(job))
        finally:
            if shown is not None:
                shown.update(progress)  # the saved notebook keeps the steps and the image (or the failure)
        return result.reference

    # ---- line magics -------------------------------------------------------------
    @magic_arguments()
    @argument("--state", help="only jobs in this state, e.g. RUNNING")
    @argument("--tuning", action="store_true", help="list HyperparameterTuningJobs (what --tune creates) instead; "
              "`trials` says how many were made of the maximum")
    @_target_arguments
    @line_magic
    def vertex_jobs(self, line: str) -> Any:
        """The jobs, newest first, as a pandas DataFrame."""
        import pandas as pd

        from . import launch

        args = parse_flags(self.vertex_jobs, line)
        with _user_errors():
            target = self._target(args)
            collection = launch.TUNING_JOBS if args.tuning else launch.CUSTOM_JOBS
            jobs = launch.list_jobs(target, states.list_filter(args.state), collection)
        rows = [launch.job_row(job, target.local, collection=collection) for job in jobs]
        columns = [*JOB_COLUMNS[:4], "trials", *JOB_COLUMNS[4:]] if args.tuning else JOB_COLUMNS
        frame = pd.DataFrame([{key: row[key] for key in columns} for row in rows], columns=columns)
        frame["state"] = frame["state"].map(states.short)
        frame = frame.rename(columns={"create_time": "created", "start_time": "started", "end_time": "ended"})
        for column in ("created", "started", "ended"):  # a column of only running jobs' None is not one of times
            frame[column] = pd.to_datetime(frame[column], utc=True)
        frame["duration"] = frame["ended"] - frame["started"]
        return frame

    @magic_arguments()
    @argument("--replica", help="open this replica's tab, e.g. workerpool1-0")
    @_job_arguments
    @line_magic
    def vertex_logs(self, line: str) -> None:
        """Show a job live (re-attaches to a running job, e.g. after a kernel restart); a tuning job's ID
        shows its trials."""
        from widgets.monitor import JobMonitor

        from . import launch

        args, handle = self._attach(self.vertex_logs, line)
        with _user_errors():
            handle.check_replica(args.replica)
        if isinstance(handle, launch.TuningHandle):
            from widgets.tuning import TuningMonitor

            view: Any = TuningMonitor(handle)
        else:
            view = self.monitor = JobMonitor(handle)
            if args.replica:
                view.show_replica(args.replica)
        shown = display(view, display_id=True)
        if states.is_final(view.state) and shown is not None:  # an ended job: its whole log, kept in the notebook
            view.wait(ENDED_JOB_WAIT)
            shown.update(view)

    @magic_arguments()
    @_job_arguments
    @line_magic
    def vertex_cancel(self, line: str) -> None:
        """Cancel a running job."""
        _, handle = self._attach(self.vertex_cancel, line)
        with _user_errors():
            handle.cancel()
        print(f"cancelling {handle.name}")

    def _attach(self, magic: Any, line: str) -> tuple[Any, launch.Handle]:
        """A line magic's flags, and a handle on the job they name."""
        from . import launch

        args = parse_flags(magic, line)
        with _user_errors():
            return args, launch.attach_any(args.job, self._target(args))


def _study(args: Any) -> Any:
    """The StudySpec of `--tune`/`--metric`/`--algorithm`, or None without `--tune`."""
    from . import tuning

    if not args.tune:
        if args.metric or args.algorithm:
            raise WorkbenchError("--metric/--algorithm: only with --tune")
        return None
    if not args.metric:
        raise WorkbenchError("--metric: --tune needs the metric to optimize, e.g. --metric accuracy:maximize")
    return tuning.study_spec(args.tune, args.metric, args.algorithm)


@contextmanager
def _user_errors() -> Iterator[None]:
    """A user's mistake, or what the API says of it (a bad job ID: 404), becomes one UsageError line."""
    from google.api_core.exceptions import GoogleAPICallError
    from google.auth.exceptions import GoogleAuthError

    try:
        yield
    except WorkbenchError as exc:
        raise UsageError(mask_urls(str(exc)).replace("\n", "; ")) from None
    except (GoogleAPICallError, GoogleAuthError) as exc:
        raise UsageError(mask_urls(client_error_message(exc) or "")) from None


def _as_sent(job: JobSpec, target: launch.Target, tuned: bool) -> JobSpec:
    """The job with what the real run adds for Vertex AI (a base output directory in the staging bucket,
    aiplatform.init's service account, network and key), as a dry run shows it; its local packages
    are uploaded only by the real run."""
    from .launch import CUSTOM_JOBS, TUNING_JOBS
    from .launch.prepare import prepare
    from .spec import JobSpec

    shown = JobSpec.load(prepare(job, target, (TUNING_JOBS if tuned else CUSTOM_JOBS).output_prefix))
    shown.source_dir = job.source_dir
    return shown


def _layout_flags(args: Any) -> list[tuple[str, Any, Any]]:
    """The inline layout flags: (flag, its value, its default)."""
    return [("--workers", args.workers, 0), ("--machine-type", args.machine_type, catalog.DEFAULT_MACHINE),
            ("--accelerator", args.accelerator, ""), ("--ps", args.ps, 0), ("--evaluators", args.evaluators, 0),
            ("--reduction-server", args.reduction_server, 0), ("--tpu", args.tpu, "")]


def parse_flags(magic: Any, line: str) -> Any:
    """A magic's flags, split as a shell splits them (`--name "my job"` is `my job`, without the quotes;
    IPython's own splitting keeps them). A flag taking one value takes the next word whatever it is,
    so `--args "--verbose"` works. A destination that is not a Python name is refused."""
    import shlex

    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"the magic's line: {exc}") from None
    parser = magic.parser
    single = {flag for action in parser._actions if action.nargs is None and action.option_strings
              for flag in action.option_strings}
    argv: list[str] = []
    for word in words:
        if argv and argv[-1] in single:
            argv[-1] = f"{argv[-1]}={word}"  # `--flag=value`: argparse takes a value starting with '-' so
        else:
            argv.append(word)
    args = parser.parse_args(argv)
    destination = getattr(args, "destination", None)
    if destination and (not destination.isidentifier() or keyword.iskeyword(destination)):
        raise UsageError(f"destination: {destination!r} is not a Python name for the job handle")
    return args
