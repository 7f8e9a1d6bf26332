"""`vtrain`: validate, inspect and run Vertex AI jobs on this machine.

User mistakes print one `vtrain: error: ...` line per problem and exit 2; no traceback.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any, Sequence

from . import cluster, validate
from .errors import WorkbenchError
from .spec import FORMATS, JobSpec

USAGE_ERROR = 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return USAGE_ERROR
    try:
        return int(args.func(args))
    except WorkbenchError as exc:
        for line in str(exc).splitlines():
            print(f"vtrain: error: {line}", file=sys.stderr)
        return USAGE_ERROR
    except BrokenPipeError:  # `vtrain ... | head`
        return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vtrain", description="Validate, inspect and run Vertex AI training jobs "
                                "on this machine before running them on Vertex AI.")
    sub = p.add_subparsers(title="commands", metavar="COMMAND")
    spec_help = ("job description, JSON or YAML: a CustomJob REST body, a gcloud CustomJobSpec config, "
                 "SDK worker_pool_specs, or a legacy AI Platform trainingInput")

    v = sub.add_parser("validate", help="check a job against Vertex AI's rules",
                       description="Check a job description; prints `ok` (exit 0) or one line per problem (exit 2).")
    v.add_argument("spec", metavar="SPEC", help=spec_help)
    v.set_defaults(func=cmd_validate)

    i = sub.add_parser("inspect", help="show every replica's address and environment",
                       description="Show what every replica would get: address, role, TF_CONFIG, CLUSTER_SPEC, "
                                   "AIP_* folders and PyTorch variables.")
    i.add_argument("spec", metavar="SPEC", help=spec_help)
    i.add_argument("--json", action="store_true", help="print a JSON list, one object per replica")
    i.add_argument("--trial", metavar="N", help="show the environment of hyperparameter tuning trial N")
    i.add_argument("--addresses", choices=cluster.ADDRESS_STYLES, default="cloud",
                   help="address style: cloud (Vertex placeholders, port 2222), process (127.0.0.1), "
                        "docker (workerpool{P}-{i}:2222); default: cloud")
    i.add_argument("--replica", metavar="TASK_NAME", help="only this replica, e.g. workerpool1-0, with its full "
                   "environment")
    i.add_argument("--legacy", action=argparse.BooleanOptionalAction, default=None,
                   help="AI Platform (master) or Vertex (chief) naming; default: from the job's format")
    i.set_defaults(func=cmd_inspect)

    c = sub.add_parser("convert", help="write a job in another format",
                       description="Load a job in any accepted format and write it in another.")
    c.add_argument("spec", metavar="SPEC", help=spec_help)
    c.add_argument("--to", choices=FORMATS, default="rest", help="output format (default: rest)")
    c.add_argument("--yaml", action="store_true", help="YAML instead of JSON")
    c.set_defaults(func=cmd_convert)

    r = sub.add_parser("run", help="run the whole job on this machine",
                       description="Run every replica on this machine with the environment Vertex AI would give it. "
                                   "Exit 0 when the job SUCCEEDED, 1 when it FAILED, 130 when it was cancelled.")
    r.add_argument("spec", metavar="SPEC", help=spec_help)
    r.add_argument("--job-dir", metavar="DIR", help="where logs and outputs go (default: the workbench's data "
                   "folder, jobs/<job id>)")
    r.add_argument("--name", metavar="NAME", help="display name (default: from the job)")
    r.add_argument("--backend", default="process", help="where replicas run: process (default)")
    r.add_argument("--quiet", action="store_true", help="do not echo replica output (it is still in the logs)")
    r.set_defaults(func=cmd_run)
    return p


def _load(path: str, name: str | None = None) -> JobSpec:
    job = JobSpec.load(path)
    if name:
        job.display_name = name
    return job


def cmd_validate(args: argparse.Namespace) -> int:
    validate.check(_load(args.spec))
    print("ok")
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    sys.stdout.write(_load(args.spec).dump(args.to, as_yaml=args.yaml))
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    job = validate.check(_load(args.spec))
    reps = cluster.replicas(job, trial=args.trial, style=args.addresses, legacy=args.legacy)
    if args.replica:
        reps = [r for r in reps if r.task_name == args.replica]
        if not reps:
            names = ", ".join(r.task_name for r in cluster.replicas(job))
            raise WorkbenchError(f"--replica: no replica {args.replica!r} in this job (replicas: {names})")
    if args.json:
        print(json.dumps([r.to_dict() for r in reps], indent=2))
    elif args.replica:
        _print_env(reps[0])
    else:
        _print_table(job, reps, args.addresses)
    return 0


def _print_table(job: JobSpec, reps: list[cluster.Replica], style: str) -> None:
    print(f"{job.display_name}: {len(reps)} replica(s), {style} addresses")
    rows = [("TASK", "ROLE", "TF_CONFIG TASK", "ADDRESS")]
    rows += [(r.task_name, r.role, f"{r.tf_task}:{r.index}" if r.tf_task else "-", r.address) for r in reps]
    widths = [max(len(row[c]) for row in rows) for c in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[3])
    first = reps[0].env
    if "TF_CONFIG" in first:
        print(f"TF_CONFIG cluster (every replica): {json.dumps(json.loads(first['TF_CONFIG'])['cluster'])}")
    else:
        print("TF_CONFIG: not set (single-replica job)")
    print(f"CLUSTER_SPEC cluster (every replica): {json.dumps(json.loads(first['CLUSTER_SPEC'])['cluster'])}")
    print("Full environment of one replica: vtrain inspect SPEC --replica TASK_NAME")


def _print_env(replica: cluster.Replica) -> None:
    print(f"{replica.task_name} ({replica.role}) at {replica.address}")
    for key in sorted(replica.env):
        value = replica.env[key]
        if key in ("TF_CONFIG", "CLUSTER_SPEC"):
            value = json.dumps(json.loads(value), indent=2).replace("\n", "\n  ")
        print(f"{key}={value}")


def cmd_run(args: argparse.Namespace) -> int:
    from .runner import FINAL_STATES, Supervisor  # keeps `vtrain validate` quick

    job = validate.check(_load(args.spec, args.name))
    lock = threading.Lock()

    def echo(task: str, _stream: str, _stamp: str, lines: list[str]) -> None:
        text = "".join(f"[{task}] {line}\n" for line in lines)
        with lock:
            sys.stdout.write(text)
            sys.stdout.flush()

    def say(text: str) -> None:
        with lock:
            print(f"vtrain: {text}", flush=True)

    sup = Supervisor(job, backend=args.backend, job_dir=args.job_dir, on_lines=None if args.quiet else echo,
                     on_note=say, on_state=lambda state: state in FINAL_STATES or say(f"job {sup.job_id} {state}"))
    say(f"job {sup.job_id} ({job.display_name}): {job.replica_count} replica(s), logs in {sup.job_dir / 'logs'}")
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        result = sup.run()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if result.error:
        say(result.error)
    say(_summary(result))
    return result.exit_code


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt  # the supervisor cancels the job, as for Ctrl-C


def _summary(result: Any) -> str:
    codes = ", ".join(f"{r.task_name}={'stopped' if r.exit_code is None else r.exit_code}" for r in result.replicas)
    return f"job {result.job_id} {result.state} [{codes}]"


if __name__ == "__main__":
    sys.exit(main())
