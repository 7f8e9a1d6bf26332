"""`vtrain`: validate, inspect and run Vertex AI jobs on this machine.

User mistakes print one `vtrain: error: ...` line per problem and exit 2; no traceback.
Each command imports what it needs when it runs, so `vtrain --help` and argument
errors never load the Vertex AI client library.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any, NoReturn, Sequence

from . import build_cli, limits, scheduling, states
from .errors import WorkbenchError, client_error_message
from .names import (ADDRESS_STYLES, DEFAULT_BACKEND, FORMATS, GCLOUD_COMMAND, MAX_FAILED_HELP, STAGING_BUCKET_FLAG,
                    TARGET_FLAGS, TUNING_PARALLEL, TUNING_TRIALS)

if TYPE_CHECKING:
    from .launch import Target
    from .spec import JobSpec

USAGE_ERROR = 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # `--` ends vtrain's arguments: what follows is a command to run (`vtrain shell JOB -- COMMAND`)
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:len(argv) - len(command) - 1] if "--" in argv else argv)
    if command and not hasattr(args, "command"):
        parser.error("a command after -- is only for vtrain shell")
    args.command = command
    if not getattr(args, "func", None):
        parser.print_help()
        return USAGE_ERROR
    try:
        return int(args.func(args))
    except WorkbenchError as exc:
        return _fail(str(exc))
    except BrokenPipeError:  # `vtrain ... | head`
        return 0
    except OSError as exc:
        if exc.filename is None:
            raise
        # a file the user named, or the data folder, cannot be read or written (no space, no permission)
        return _fail(f"{exc.filename}: {exc.strerror or exc}")
    except Exception as exc:
        # errors the API clients report (bad job ID, no credentials) are the user's to fix, not bugs
        if (message := client_error_message(exc)) is None:
            raise
        return _fail(message)


def _fail(message: str) -> int:
    from .sensitive import mask_urls  # a URL's credentials in what the user wrote (a package, an output)

    for line in mask_urls(message).splitlines():
        print(f"vtrain: error: {line}", file=sys.stderr)
    return USAGE_ERROR


class _Parser(argparse.ArgumentParser):
    """argparse's parser with a wrong argument as one `vtrain: error:` line, like every other mistake."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"vtrain: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="vtrain", description="Validate, inspect and run Vertex AI training jobs "
                "on this machine before running them on Vertex AI.")
    sub = p.add_subparsers(title="commands", metavar="COMMAND")
    spec_help = ("job description, JSON or YAML: a CustomJob REST body, a gcloud CustomJobSpec config, "
                 "SDK worker_pool_specs, or a legacy AI Platform trainingInput")

    v = sub.add_parser("validate", help="check a job against Vertex AI's rules",
                       description="Check a job description; prints `ok` (exit 0) or one line per problem (exit 2). "
                                   "Notes (allowed, but worth knowing) go to stderr.")
    v.add_argument("spec", metavar="SPEC", help=spec_help + "; or a HyperparameterTuningJob REST body")
    v.add_argument("--region", metavar="REGION", help="also refuse what this Vertex AI region does not offer "
                   "(machines, accelerators)")
    v.set_defaults(func=cmd_validate)

    co = sub.add_parser("cost", help="estimate what a job costs per hour",
                        description="Estimate the job's cost per hour, pool by pool, from the workbench's price "
                                    "data (Compute Engine list prices of a dated copy, not Vertex AI's own: see the "
                                    "README). What has no price is listed, never guessed.")
    co.add_argument("spec", metavar="SPEC", help=spec_help)
    co.add_argument("--region", metavar="REGION", help="the Vertex AI region (default: see the README's "
                    "'Where jobs run')")
    co.add_argument("--spot", action="store_true", help="Spot prices (the default for a job whose "
                    "scheduling.strategy is SPOT)")
    co.set_defaults(func=cmd_cost)

    i = sub.add_parser("inspect", help="show every replica's address and environment",
                       description="Show what every replica would get: address, role, TF_CONFIG, CLUSTER_SPEC, "
                                   "AIP_* folders and PyTorch variables.")
    i.add_argument("spec", metavar="SPEC", help=spec_help)
    i.add_argument("--json", action="store_true", help="print a JSON list, one object per replica")
    i.add_argument("--trial", type=limits.positive, metavar="N",
                   help="show the environment of hyperparameter tuning trial N (trials count from 1)")
    i.add_argument("--addresses", choices=ADDRESS_STYLES, default="cloud",
                   help="address style: cloud (Vertex placeholders, port 2222), process (127.0.0.1), "
                        "docker (workerpool{P}-{i}:2222); default: cloud")
    i.add_argument("--replica", metavar="TASK_NAME", help="only this replica, e.g. workerpool1-0, with its full "
                   "environment")
    i.add_argument("--legacy", action="store_true",
                   help="AI Platform's names (TF_CONFIG master unless useChiefInTfConfig; CLUSTER_SPEC master, "
                        "worker, ps, evaluator), as a trainingInput job got them there; default: Vertex AI's "
                        "(chief, workerpool0...), which every job gets when it runs, here or on Vertex AI")
    i.add_argument("--show-env-values", action="store_true", help="show the values of the job's env "
                   "(default: NAME=***, also inside TF_CONFIG's and CLUSTER_SPEC's job)")
    i.set_defaults(func=cmd_inspect)

    c = sub.add_parser("convert", help="write a job in another format",
                       description="Load a job in any accepted format and write it in another, or as the "
                                   "equivalent `gcloud ai custom-jobs create` command line.")
    c.add_argument("spec", metavar="SPEC", help=spec_help)
    c.add_argument("--to", choices=(*FORMATS, GCLOUD_COMMAND), default="rest", help="output format (default: rest)")
    c.add_argument("--yaml", action="store_true", help="YAML instead of JSON")
    c.add_argument("--region", metavar="REGION", help=f"with --to {GCLOUD_COMMAND}: the Vertex AI region "
                   "(default: see the README's 'Where jobs run')")
    c.set_defaults(func=cmd_convert)

    r = sub.add_parser("run", help="run the whole job on this machine",
                       description="Run every replica on this machine with the environment Vertex AI would give it. "
                                   "Exit 0 when the job SUCCEEDED, 1 when it FAILED, 130 when it was cancelled.")
    r.add_argument("spec", metavar="SPEC", help=spec_help)
    r.add_argument("--job-dir", metavar="DIR", help="where logs and outputs go (default: the workbench's data "
                   "folder, jobs/<job id>)")
    r.add_argument("--name", metavar="NAME", help="display name (default: from the job)")
    r.add_argument("--env", action="append", metavar="NAME[=VALUE]", help="an environment variable for every "
                   "replica, repeatable (NAME alone: this environment's value); it goes into the job's env")
    r.add_argument("--backend", default=DEFAULT_BACKEND, help="where replicas run: process (default) or docker "
                   "(containers on a per-job network; engine from DOCKER_HOST)")
    r.add_argument("--quiet", action="store_true", help="do not echo replica output (it is still in the logs)")
    r.add_argument("--max-replicas", type=limits.positive, metavar="N", help="refuse a job of more replicas "
                   f"(default: {limits.machine_replicas()} on this machine, the local service's default)")
    scheduling.add_arguments(r.add_argument_group("scheduling and access (the job's fields; see the README)"))
    r.set_defaults(func=cmd_run)
    build_cli.add_parser(sub)

    s = sub.add_parser("submit", help="launch a CustomJob (local service by default, or Vertex AI)",
                       description="Create the CustomJob through the Vertex AI client: on the local service (started "
                                   "on demand) by default, on Vertex AI with --vertex or --project (see the "
                                   "README's 'Where jobs run').")
    s.add_argument("spec", metavar="SPEC", help=spec_help)
    s.add_argument("--name", metavar="NAME", help="display name (default: from the job)")
    s.add_argument("--env", action="append", metavar="NAME[=VALUE]", help="an environment variable for every "
                   "replica, repeatable (NAME alone: this environment's value); it goes into the job's env")
    s.add_argument("--backend", default=DEFAULT_BACKEND, help="local replicas as: process (default) or docker")
    s.add_argument("--follow", action="store_true", help="stream the logs until the job ends; exit 0 SUCCEEDED, "
                   "1 FAILED, 130 CANCELLED")
    _target_flags(s, staging=True)
    scheduling.add_arguments(s.add_argument_group("scheduling and access (the job's fields; see the README)"))
    s.set_defaults(func=cmd_submit)

    j = sub.add_parser("jobs", help="list jobs", description="List CustomJobs (or tuning jobs), newest first.")
    j.add_argument("--state", metavar="STATE", help="only jobs in this state, e.g. JOB_STATE_RUNNING or RUNNING")
    j.add_argument("--tuning", action="store_true", help="list HyperparameterTuningJobs (what vtrain tune and the "
                   "magic's --tune create) instead")
    j.add_argument("--json", action="store_true", help="print the jobs as JSON")
    _target_flags(j)
    j.set_defaults(func=cmd_jobs)

    lg = sub.add_parser("logs", help="show a job's logs", description="Show a job's log entries, read through "
                        "the Cloud Logging client (from Cloud Logging, or from the local service).")
    lg.add_argument("job", metavar="JOB", help="job ID or resource name (a CustomJob or a tuning job: every trial's "
                    "lines, named TRIAL/TASK_NAME)")
    lg.add_argument("--replica", metavar="TASK_NAME", help="only this replica, e.g. workerpool1-0")
    lg.add_argument("--follow", "-f", action="store_true", help="keep showing new lines until the job ends")
    _target_flags(lg)
    lg.set_defaults(func=cmd_logs)

    sh = sub.add_parser("shell", help="open a shell in a running replica",
                        usage="vtrain shell [-h] JOB [--replica TASK_NAME] [target flags] [-- COMMAND ...]",
                        description="Open a shell (or run the COMMAND after --) in a replica of a running job "
                                    "created with --enable-web-access: locally inside its container (docker backend) or in its "
                                    "working folder with its exact environment (process backend); on Vertex AI, "
                                    "print the replica's interactive-shell URI (webAccessUris).")
    sh.add_argument("job", metavar="JOB", help="job ID or resource name")
    sh.add_argument("--replica", metavar="TASK_NAME", default="workerpool0-0",
                    help="the replica, e.g. workerpool1-0 (default: workerpool0-0, the primary)")
    sh.set_defaults(command=[])  # after `--` (main): run it instead of an interactive shell; its exit code is ours
    _target_flags(sh)
    sh.set_defaults(func=cmd_shell)

    cn = sub.add_parser("cancel", help="cancel a job", description="Cancel a running job.")
    cn.add_argument("job", metavar="JOB", help="job ID or resource name (a CustomJob or a tuning job)")
    _target_flags(cn)
    cn.set_defaults(func=cmd_cancel)

    t = sub.add_parser("tune", help="run a hyperparameter tuning job (local service by default, or Vertex AI)",
                       description="Create a HyperparameterTuningJob whose trials each run the whole job, with the "
                                   "parameters as --name=value and `trial` in TF_CONFIG and CLUSTER_SPEC; the trainer "
                                   "reports its metric with cloudml-hypertune. Waits and prints the trials; exit 0 "
                                   "SUCCEEDED, 1 FAILED, 130 CANCELLED.")
    t.add_argument("spec", metavar="SPEC", help=spec_help + "; or a HyperparameterTuningJob REST body (studySpec, "
                   "trialJobSpec, maxTrialCount, ...), which the flags below override")
    t.add_argument("--params", "--tune", dest="params", metavar="PARAMS", help='the parameters, e.g. '
                   '"lr=double:1e-4:1e-1:log, units=int:16:128, optimizer=categorical:adam,sgd" '
                   "(types: double, int, categorical, discrete; scales: linear, log, reverse_log)")
    t.add_argument("--metric", metavar="METRIC:GOAL", help="the metric to optimize, e.g. accuracy:maximize")
    t.add_argument("--trials", type=limits.positive, metavar="N", help=f"maxTrialCount (default {TUNING_TRIALS})")
    t.add_argument("--parallel", type=limits.positive, metavar="N",
                   help=f"parallelTrialCount (default {TUNING_PARALLEL})")
    t.add_argument("--max-failed", type=limits.at_least(0), metavar="N", help=MAX_FAILED_HELP)
    t.add_argument("--algorithm", choices=("random", "grid", "bayesian"), help="the search (default: Vertex AI's "
                   "Bayesian optimization, random search on this machine)")
    t.add_argument("--name", metavar="NAME", help="display name (default: from the job)")
    t.add_argument("--env", action="append", metavar="NAME[=VALUE]", help="an environment variable for every "
                   "replica, repeatable (NAME alone: this environment's value); it goes into the job's env")
    t.add_argument("--backend", default=DEFAULT_BACKEND, help="local replicas as: process (default) or docker")
    t.add_argument("--no-wait", action="store_true", help="return once the tuning job is created")
    _target_flags(t, staging=True)
    scheduling.add_arguments(t.add_argument_group("scheduling and access of every trial (the trial job's fields; "
                                                  "see the README)"))
    t.set_defaults(func=cmd_tune)

    nb = sub.add_parser("notebook", help="run a lesson notebook headless and summarise its jobs",
                        description="Execute a notebook with a real kernel (nbclient) and print each job's state, "
                                    "its replicas, and where the executed notebook and the logs are. "
                                    "Exit 1 when a cell failed, as papermill does (a job that fails while its cell "
                                    "waits fails that cell; one whose error the notebook caught, as lesson 04 does, "
                                    "is listed as FAILED and does not count).")
    nb.add_argument("path", metavar="NOTEBOOK", help="the .ipynb file")
    nb.add_argument("--output", metavar="FILE", help="where the executed notebook goes")
    nb.set_defaults(func=cmd_notebook)

    sv = sub.add_parser("service", help="manage the local service",
                        description="The local service speaks Vertex AI's CustomJob API and Cloud Logging's "
                                    "entries:list on 127.0.0.1 and runs jobs on this machine.")
    sv.add_argument("action", choices=("start", "stop", "status"))
    sv.add_argument("--json", action="store_true", help="status as JSON (endpoint, token_file, pid, options)")
    from .service.emulation import add_arguments  # nothing heavy: the service's own flags

    add_arguments(sv, when="start: ")
    sv.set_defaults(func=cmd_service)

    g = sub.add_parser("gc", help="prune old jobs' folders, build contexts and the local bucket",
                       description="Remove from the workbench's data folder what may go: folders of jobs that are "
                                   "over (never a running or queued one), build contexts, and files of the local "
                                   "bucket folder (not those of a job still running). Say what with at least one of "
                                   "the flags; the local service can do it daily (VTRAIN_GC_* variables, see the "
                                   "README).")
    g.add_argument("--older-than", metavar="DURATION", help="what was last modified longer ago, e.g. 30d, 12h, 1w2d")
    g.add_argument("--keep", metavar="N", help="keep the N newest jobs and the N newest build contexts")
    g.add_argument("--max-size", metavar="SIZE", help="then remove the oldest until the data folder is at most "
                   "SIZE, e.g. 20G, 500M")
    g.add_argument("--dry-run", action="store_true", help="print what would go and its size; remove nothing")
    g.set_defaults(func=cmd_gc)
    return p


def _target_flags(p: argparse.ArgumentParser, staging: bool = False) -> None:
    for flag, options in TARGET_FLAGS.items():
        p.add_argument(flag, **options)  # type: ignore[arg-type]
    if staging:
        p.add_argument(STAGING_BUCKET_FLAG[0], **STAGING_BUCKET_FLAG[1])  # type: ignore[arg-type]


def _target(args: argparse.Namespace) -> Target:
    from .launch import Target

    return Target.resolve(vertex=args.vertex, project=args.project, region=args.region,
                          staging_bucket=getattr(args, "staging_bucket", None), endpoint=args.endpoint,
                          backend=getattr(args, "backend", None), access_token_file=args.access_token_file)


def _load(path: str, args: argparse.Namespace | None = None) -> JobSpec:
    """The job in a file, with what the command line sets: `--name`, `--env` and the scheduling flags."""
    from .spec import JobSpec

    job = JobSpec.load(path)
    if args is None:
        return job
    if getattr(args, "name", None):
        job.display_name = args.name
    return _with_flags(job, args)


def _with_flags(job: JobSpec, args: argparse.Namespace) -> JobSpec:
    """`job` with the fields the command line sets for every replica: `--env` and the scheduling flags."""
    from .environment import env_flags

    if getattr(args, "env", None):
        job = job.with_env(env_flags(args.env))
    return scheduling.from_args(job, args) if hasattr(args, "strategy") else job


def _print_table(rows: Sequence[Sequence[str]]) -> None:
    from .tables import text_table

    print("\n".join(text_table(rows)))


def cmd_validate(args: argparse.Namespace) -> int:
    from . import tuning, validate

    resource = tuning.load_request(args.spec)  # a HyperparameterTuningJob body, as `vtrain tune` takes
    if resource is not None:
        job = validate.check_tuning(resource, local=False)  # its trial job, checked as part of it
        notes = tuning.notices(resource)
    else:
        job, notes = _load(args.spec), []
    for note in [*validate.notices(job, args.region), *notes]:
        print(f"vtrain: note: {note}", file=sys.stderr)
    validate.check(job, args.region)
    print("ok")
    return 0


def cmd_cost(args: argparse.Namespace) -> int:
    from . import cost, tuning, validate

    resource = tuning.load_request(args.spec)  # a HyperparameterTuningJob body: its trial job, times the parallel
    # a job Vertex would refuse has no price (a replica count of -3: -$0.57)
    job = validate.check_tuning(resource, local=False) if resource is not None else validate.check(_load(args.spec))
    region = _training_region(args.region)
    spot = args.spot or cost.spot_by_default(job)
    estimate = cost.estimate(job, region)
    sys.stdout.write(estimate.text(spot))
    if resource is not None:
        print(cost.parallel_trials(estimate, resource.parallel_trial_count or 1, spot))
    return 0


def _training_region(flag: str | None) -> str:
    """The region a command prices or writes a command for (see resolve_region); one where Vertex AI trains."""
    from . import validate
    from .launch.target import resolve_region

    region = resolve_region(flag)
    if problem := validate.region_problem(region):
        raise WorkbenchError(problem)
    return region


def cmd_convert(args: argparse.Namespace) -> int:
    if args.region and args.to != GCLOUD_COMMAND:
        raise WorkbenchError(f"--region: only with --to {GCLOUD_COMMAND} (the command names the region); "
                             f"--to {args.to} holds none")
    if args.yaml and args.to == GCLOUD_COMMAND:
        raise WorkbenchError(f"--yaml: --to {GCLOUD_COMMAND} writes a command line, not JSON or YAML")
    job, study = _job_or_trials(args.spec)
    if study is not None and args.to == "rest":  # a tuning job stays one
        import yaml

        from .spec import message_to_dict

        body = message_to_dict(study)
        sys.stdout.write(yaml.safe_dump(body, sort_keys=False) if args.yaml else json.dumps(body, indent=2) + "\n")
        return 0
    if study is not None and not (args.to == "legacy" and job.tuning is not None):
        print(f"vtrain: note: it is a HyperparameterTuningJob on Vertex AI, which --to {args.to} cannot hold (use "
              "--to rest); this is the trials' job", file=sys.stderr)
    if args.to == GCLOUD_COMMAND:
        from . import exports

        sys.stdout.write(exports.gcloud_command(job, _training_region(args.region)))
    else:
        sys.stdout.write(job.dump(args.to, as_yaml=args.yaml))
    held = [name for name, value in (("labels", job.labels), ("encryptionSpec", job.encryption_spec.kms_key_name))
            if value]
    if args.to == "gcloud" and held:  # a CustomJobSpec: the CustomJob's own fields are gcloud's flags
        print(f"vtrain: note: a --config file cannot hold {' and '.join(held)}; gcloud takes them as --labels and "
              f"--kms-key (--to {GCLOUD_COMMAND} writes the whole command)", file=sys.stderr)
    return 0


def _job_or_trials(path: str) -> tuple[JobSpec, Any]:
    """The job in a file, and the HyperparameterTuningJob it is part of, if any: the file is a tuning
    job's body (its trials' job), or a legacy job with `hyperparameters`."""
    from . import tuning

    resource = tuning.load_request(path)
    if resource is not None:
        return tuning.trial_base_job(resource), resource
    job = _load(path)
    return job, job.tuning_job()


def cmd_inspect(args: argparse.Namespace) -> int:
    from . import cluster, validate

    job = validate.check(_job_or_trials(args.spec)[0])  # a tuning job: its trials' (see --trial)
    mask = not args.show_env_values
    reps = cluster.replicas(job, trial=args.trial, style=args.addresses, legacy=args.legacy, mask_env=mask)
    if args.replica:
        reps = [r for r in reps if r.task_name == args.replica]
        if not reps:
            names = ", ".join(r.task_name for r in cluster.replicas(job))
            raise WorkbenchError(f"--replica: no replica {args.replica!r} in this job (replicas: {names})")
    if args.json:
        print(json.dumps([r.to_dict() for r in reps], indent=2))
    elif args.replica:
        _print_env(reps[0], job, mask)
    else:
        _print_replicas(job, reps, args.addresses)
    if args.addresses == "process" and not args.json:
        from .environment import Runtime

        print(Runtime.here().describe())
    return 0


def _print_replicas(job: JobSpec, reps: list[Any], style: str) -> None:
    print(f"{job.display_name}: {len(reps)} replica(s), {style} addresses")
    _print_table([("TASK", "ROLE", "TF_CONFIG TASK", "ADDRESS")] +
                 [(r.task_name, r.role, f"{r.tf_task}:{r.index}" if r.tf_task else "-", r.address) for r in reps])
    first = reps[0].env
    if "TF_CONFIG" in first:
        print(f"TF_CONFIG cluster (every replica): {json.dumps(json.loads(first['TF_CONFIG'])['cluster'])}")
    else:
        print("TF_CONFIG: not set (single-replica job)")
    print(f"CLUSTER_SPEC cluster (every replica): {json.dumps(json.loads(first['CLUSTER_SPEC'])['cluster'])}")
    print("Full environment of one replica: vtrain inspect SPEC --replica TASK_NAME")


def _print_env(replica: Any, job: JobSpec, mask: bool) -> None:
    from .sensitive import MASK

    print(f"{replica.task_name} ({replica.role}) at {replica.address}")
    for key in sorted(replica.env):
        value = replica.env[key]
        if key in ("TF_CONFIG", "CLUSTER_SPEC"):
            value = json.dumps(json.loads(value), indent=2).replace("\n", "\n  ")
        print(f"{key}={value}")
    pool = job.spec.worker_pool_specs[replica.pool]
    env = (pool.container_spec if "container_spec" in pool else pool.python_package_spec).env
    if env:
        hint = "; --show-env-values shows the values" if mask else ""
        print(f"the job's env (workerPoolSpecs[{replica.pool}]){hint}:")
        for var in env:
            print(f"{var.name}={MASK if mask else var.value}")


def cmd_run(args: argparse.Namespace) -> int:
    from . import sensitive, validate
    from .launch.prepare import local_output_folder
    from .runner import Supervisor

    job = validate.check(_load(args.spec, args))
    if (outputs := local_output_folder(job)) is not None:  # relative to the job file's folder, as `submit` has it
        _usable_folder(str(outputs), "baseOutputDirectory.outputUriPrefix")
        job.spec.base_output_directory.output_uri_prefix = str(outputs)
    # every replica is a process or a container here: a typo (5000 for 5) must not start them all
    limits.check_job(job.spec.worker_pool_specs, limits.Limits(max_replicas=args.max_replicas or 0), runner="run")
    lock = threading.Lock()

    def echo(task: str, _stream: str, _stamp: str, lines: list[str]) -> None:
        text = "".join(f"[{task}] {line}\n" for line in lines)
        with lock:
            sys.stdout.write(text)
            sys.stdout.flush()

    def say(text: str) -> None:
        with lock:
            try:
                print(f"vtrain: {text}", flush=True)
            except OSError:  # the terminal is gone (SIGHUP): the job's folder still has it all
                pass

    if args.job_dir is not None:
        if not args.job_dir.strip() or "://" in args.job_dir:
            raise WorkbenchError(f"--job-dir: {args.job_dir!r} is not a folder on this machine (the job's logs "
                                 "and files; its outputs go to the job's baseOutputDirectory, which may be gs://)")
        _usable_folder(args.job_dir, "--job-dir")
    sup = Supervisor(job, backend=args.backend, job_dir=args.job_dir, on_lines=None if args.quiet else echo,
                     on_note=say, on_state=lambda state: states.is_final(state) or say(f"job {sup.job_id} {state}"))
    say(f"job {sup.job_id} ({job.display_name}): {job.replica_count} replica(s), logs in {sup.job_dir / 'logs'}")
    # `kill` and closing the terminal cancel the job as Ctrl-C does; if vtrain itself is killed
    # (SIGKILL), the backend's watchdog stops the replicas (runner/reaper.py)
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        result = sup.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if result.error:
        say(sensitive.mask_urls(result.error))
    say(_summary(result))
    return result.exit_code


def cmd_submit(args: argparse.Namespace) -> int:
    from .launch import preflight, submit

    job, target = _load(args.spec, args), _target(args)
    for note in preflight.notices(job, target):
        print(f"vtrain: note: {note}", file=sys.stderr)
    handle = submit(job, target, display_name=args.name)
    where = handle.console_url or "the local service"
    print(f"submitted {handle.name} ({where})")
    if not args.follow:
        print(f"follow it with: vtrain logs {handle.id} --follow{target.flags()}")
        return 0
    try:
        _print_logs(handle, None, follow=True)
    except KeyboardInterrupt:
        print(f"stopped following; the job goes on (vtrain cancel {handle.id}{target.flags()})")
        return 130
    state = handle.wait()
    if handle.error:
        print(handle.error)
    print(f"job {handle.id} {states.short(state)}")
    return states.exit_code(state)


def cmd_jobs(args: argparse.Namespace) -> int:
    from .launch import CUSTOM_JOBS, TUNING_JOBS, job_row, list_jobs

    target = _target(args)
    collection = TUNING_JOBS if args.tuning else CUSTOM_JOBS
    jobs = list_jobs(target, states.list_filter(args.state), collection)
    if args.json:
        from .sensitive import mask_job
        from .spec import message_to_dict

        print(json.dumps([mask_job(message_to_dict(j)) for j in jobs], indent=2))
        return 0
    rows = [job_row(job, target.local, collection=collection) for job in jobs]
    count = "TRIALS" if args.tuning else "REPLICAS"
    _print_table([("ID", "STATE", count, "CREATED", "NAME")] +
                 [(r["id"], states.short(r["state"]), r["trials"] if args.tuning else str(r["replicas"]),
                   r["create_time"].strftime("%Y-%m-%d %H:%M:%S") if r["create_time"] else "", r["display_name"])
                  for r in rows])
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    from .launch import attach_any

    handle = attach_any(args.job, _target(args))  # a job that does not exist is an error, not an empty log
    handle.check_replica(args.replica)  # and so is a replica it does not have
    try:
        _print_logs(handle, args.replica, follow=args.follow)
    except KeyboardInterrupt:
        return 130
    return 0


def _usable_folder(path: str, flag: str) -> None:
    """A folder the job writes to: made if missing; a user mistake (a file, no permission) is one line."""
    from pathlib import Path

    from . import paths

    if problem := paths.folder_problem(Path(path)):
        raise WorkbenchError(f"{flag}: {problem}")


def _print_logs(handle: Any, replica: str | None, follow: bool) -> None:
    for record in handle.logs(replica=replica, follow=follow):
        stamp = record.timestamp.strftime("%H:%M:%S.%f")[:-3]
        print(f"{stamp} [{record.task_name}] {record.text}", flush=True)


def cmd_shell(args: argparse.Namespace) -> int:
    from . import replica_shell
    from .launch import attach

    handle = attach(args.job, _target(args))
    if handle.target.local:
        return replica_shell.run(handle.refresh(), args.replica, args.command)
    uris = replica_shell.access(handle.refresh(), local=False)
    if args.replica not in uris:  # a dashboard's key is `TASK:PORT`, so only a shell matches a task name
        raise WorkbenchError(f"--replica: Vertex AI gives no shell for {args.replica} of {handle.name} "
                             "(the job needs --enable-web-access, not only --enable-dashboard-access, "
                             "and must be running)")
    print(f"open in a browser: {uris[args.replica]}")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    from .launch import attach_any

    handle = attach_any(args.job, _target(args))
    handle.cancel()
    print(f"cancelling {handle.name}")
    return 0


def cmd_notebook(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .notebooks import read_notebook, run_notebook

    path = Path(args.path)
    if not path.is_file():
        raise WorkbenchError(f"NOTEBOOK: {path} is a folder, not a notebook" if path.is_dir() else
                             f"NOTEBOOK: no such file {path}")
    read_notebook(path)  # before saying it runs
    print(f"running {path} ...", flush=True)
    run = run_notebook(path, Path(args.output) if args.output else None)
    for job in run.jobs:
        replicas = ", ".join(f"{task}={code}" for task, code in job.replicas)
        print(f"job {job.id} ({job.display_name}): {job.state} [{replicas}]")
        print(f"  logs: {job.logs}")
    for error in run.errors:
        print(f"error in {error}")
    print(f"executed notebook: {run.executed}")
    return 1 if run.errors else 0


def cmd_gc(args: argparse.Namespace) -> int:
    from . import gc

    if not (args.older_than or args.keep or args.max_size):
        raise WorkbenchError("--older-than, --keep or --max-size: say what may go (vtrain gc --help)")
    policy = gc.Policy(gc.parse_duration(args.older_than, "--older-than") if args.older_than else None,
                       gc.parse_count(args.keep, "--keep") if args.keep else None,
                       gc.parse_size(args.max_size, "--max-size") if args.max_size else None)
    report = gc.prune(policy, dry_run=args.dry_run)
    rows = [(gc.human(item.bytes), item.kind, str(item.path)) for item in report.items]
    if rows:
        _print_table([("SIZE", "WHAT", "WOULD GO" if args.dry_run else "REMOVED")] + rows)
    print(f"{'would free' if args.dry_run else 'freed'} {gc.human(report.bytes)} ({report.bytes} bytes) in "
          f"{len(report.items)} item(s)")
    for error in report.errors:
        print(f"vtrain: error: {error}", file=sys.stderr)
    return 1 if report.errors else 0


def cmd_service(args: argparse.Namespace) -> int:
    from .service import daemon

    if args.action == "start":
        from .service.emulation import Options

        options = Options.from_args(args)
        info = daemon.ensure_running(options if options != Options() else None)  # no flags: any running one
        already = "already running" if info.get("already_running") else "local service"
        print(f"{already} on {info['endpoint']} (pid {info['pid']})")
    elif args.action == "stop":
        print("stopped" if daemon.stop() else "not running")
    else:
        info = daemon.status()
        if args.json:
            print(json.dumps(info or {"running": False, "token_file": str(daemon.token_file())}, indent=2))
        elif info:
            print(f"running on {info['endpoint']} (pid {info['pid']}); token in {info['token_file']}")
        else:
            print("not running")
        return 0 if info else 1
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from pathlib import Path

    from . import tuning
    from .launch import preflight, submit_tuning, tuning_request
    from .spec import JobSpec

    resource = tuning.load_request(args.spec)
    source_dir = Path(args.spec).resolve().parent if Path(args.spec).is_file() else None
    if resource is None:
        if not args.params or not args.metric:
            raise WorkbenchError("--params and --metric: both are needed unless SPEC is a HyperparameterTuningJob")
        resource = tuning_request(_load(args.spec), tuning.study_spec(args.params, args.metric))
    # every trial runs the trial job: --env and the scheduling flags go there, whichever form SPEC has
    trial_job = _with_flags(JobSpec(resource.display_name, resource.trial_job_spec), args)
    resource.trial_job_spec = trial_job.spec
    if args.params or args.metric:
        study = resource.study_spec
        if args.params:
            study.parameters = tuning.parse_parameters(args.params)
        if args.metric:
            study.metrics = tuning.parse_metrics(args.metric)
    if args.algorithm:
        resource.study_spec.algorithm = tuning.parse_algorithm(args.algorithm)
    for flag, name in (("trials", "max_trial_count"), ("parallel", "parallel_trial_count"),
                       ("max_failed", "max_failed_trial_count")):
        if getattr(args, flag) is not None:
            setattr(resource, name, getattr(args, flag))
    if args.name:
        resource.display_name = args.name
    target = _target(args)
    handle = submit_tuning(resource, target, source_dir=source_dir)
    print(f"submitted {handle.name} ({handle.console_url or 'the local service'})")
    for note in [*preflight.notices(trial_job, target), *tuning.notices(resource, local=target.local)]:
        print(f"note: {note}")
    if args.no_wait:
        return 0
    try:
        state = _follow_trials(handle)
    except KeyboardInterrupt:
        print(f"stopped following; the tuning job goes on (vtrain cancel {handle.id}{target.flags()})")
        return 130
    final = handle.resource
    _print_trials(final)
    if final.error.message:
        print(final.error.message)
    print(tuning.summary(final))
    print(f"tuning job {handle.id} {states.short(state)}")
    return states.exit_code(state)


def _follow_trials(handle: Any, poll: float = 1.0) -> str:
    """Print each trial's changes of state until the tuning job ends; its final state."""
    import time

    from . import tuning

    shown: dict[str, str] = {}
    while True:
        resource = handle.refresh()
        metric = tuning.metric_name(resource)
        for trial in resource.trials:
            state = tuning.trial_state_label(trial, resource)
            if shown.get(trial.id) == state:
                continue
            shown[trial.id] = state
            params = " ".join(tuning.trial_args(tuning.parameters_of(trial)))
            value = tuning.metric_value(trial, metric)
            detail = f" {metric}={value:.6g}" if value is not None else ""
            if trial.infeasible_reason:  # FAILED, or STOPPED by a cancel or the job's failure
                detail = f": {_one_line(trial.infeasible_reason)}"
            print(f"trial {trial.id} {state}{detail}  [{params}]", flush=True)
        if states.is_final(resource.state):
            return resource.state.name
        time.sleep(poll)


def _one_line(reason: str) -> str:
    """A runner error's first line, with its last output line instead of the `last lines:` block."""
    from . import failure

    first, tail = failure.split(reason.strip())
    last = next((line.strip() for line in reversed(tail) if line.strip()), "")
    return f"{first}: {last}" if last else first


def _print_trials(resource: Any) -> None:
    from . import tuning

    metric = tuning.metric_name(resource)
    names = [p.parameter_id for p in resource.study_spec.parameters]
    rows = [("TRIAL", "STATE", metric.upper(), *(n.upper() for n in names))]
    for trial in resource.trials:
        params = tuning.parameters_of(trial)
        value = tuning.metric_value(trial, metric)
        rows.append((trial.id, tuning.trial_state_label(trial, resource), "-" if value is None else f"{value:.6g}",
                     *(tuning.format_value(params[n]) if n in params else "-" for n in names)))
    _print_table(rows)


def _interrupt(signum: int, _frame: Any) -> None:
    why = {signal.SIGHUP: "its terminal closed"}.get(signum, "it was asked to stop")
    raise KeyboardInterrupt(f"cancelled: {why} ({signal.Signals(signum).name})")  # the supervisor cancels, as Ctrl-C


def _summary(result: Any) -> str:
    codes = ", ".join(f"{r.task_name}={'stopped' if r.exit_code is None else r.exit_code}" for r in result.replicas)
    return f"job {result.job_id} {result.state} [{codes}]"


if __name__ == "__main__":
    sys.exit(main())
