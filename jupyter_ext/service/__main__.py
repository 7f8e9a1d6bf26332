"""`python -m jupyter_ext.service [--port N] [--idle-timeout S] [--read-quota N] [--ingestion-delay S]
[--ingestion-jitter S] [--record-requests] [--max-replicas N] [--max-replicas-per-job N] [--max-running-jobs N]
[--max-trials N]`: run the local service in the foreground.

Usually started detached by `vtrain service start` or the first local submit. One runs per data
folder: a second start prints "already running (pid N, endpoint URL)" to stderr and exits 1,
changing nothing (see `daemon`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import secrets
import signal
import sys

import tornado.httpserver
import tornado.netutil

from .. import gc, paths
from . import daemon
from .app import MAX_STREAMED, Service, make_app
from .emulation import Options, RequestRecord, add_arguments
from .jobs import JobManager
from .queueing import JobQueue
from .store import JobStore
from .tuning_jobs import TuningManager

HOST = "127.0.0.1"  # loopback only: local jobs run code as the user
# A connection that sends no complete request for this long is closed (tornado's default is an hour, and
# no limit on a body): a client speaking TLS to this plain-HTTP service waits for an answer that never
# comes, and hangs until then. The workbench's clients send a request at once, and poll at most every
# 30 s (an idle connection closed between polls is reopened by the client).
IDLE_TIMEOUT = 60.0


async def serve(port: int, options: Options, idle_timeout: float = IDLE_TIMEOUT) -> None:
    """Serve until SIGTERM or SIGINT; the caller holds the service lock."""
    token = secrets.token_urlsafe(32)
    database = paths.job_store_file()
    queue = JobQueue(options.limits)  # one set of limits for every collection
    managers = [JobManager(JobStore(database), paths.jobs_dir(), queue),
                TuningManager(JobStore(database, TuningManager.collection), paths.jobs_dir(), queue)]
    for manager in managers:
        for job_id in manager.recover():
            print(f"{manager.collection.kind} {job_id} was running when the service stopped: marked FAILED",
                  flush=True)
    gc.keep_pruning(lambda text: print(text, flush=True))  # only with a VTRAIN_GC_* policy set
    sockets = tornado.netutil.bind_sockets(port, HOST)
    record = RequestRecord(daemon.runtime_dir() / "requests.jsonl") if options.record_requests else None
    service = Service(token, managers, paths.jobs_dir(), options, record)
    server = tornado.httpserver.HTTPServer(make_app(service), max_body_size=MAX_STREAMED,
                                           idle_connection_timeout=idle_timeout, body_timeout=idle_timeout)
    server.add_sockets(sockets)
    endpoint = f"http://{HOST}:{sockets[0].getsockname()[1]}"
    daemon.write_runtime(endpoint, token, options)
    print(f"local Vertex AI service on {endpoint} (limits: {options.limits})", flush=True)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    try:
        await stopping.wait()
    finally:
        daemon.clear_runtime()
        server.stop()
        for manager in managers:  # queued jobs are cancelled, running ones too, their replicas stopped
            await loop.run_in_executor(None, manager.shutdown)
            manager.store.close()
        service.workers.close()
        print("stopped", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m jupyter_ext.service")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--idle-timeout", type=float, default=IDLE_TIMEOUT, metavar="SECONDS",
                        help="close a connection that sends no complete request (headers, then body) for that "
                             f"long (default: {IDLE_TIMEOUT:g})")
    add_arguments(parser)
    args = parser.parse_args()
    lock = daemon.hold_lock()
    if lock is None:
        print(daemon.already_running(), file=sys.stderr)
        sys.exit(1)
    logging.basicConfig(format="%(asctime)s %(name)s %(levelname)s %(message)s")  # tornado's errors, tracebacks
    logging.getLogger("tornado.access").setLevel(logging.ERROR)  # a user's 4xx is theirs, not the log's
    # slow work runs in threads (see app.Workers): hand the GIL over every millisecond rather than
    # every 5, so a GET waits less behind a listing that filters every line in Python
    sys.setswitchinterval(0.001)
    with lock:  # held until the process ends
        asyncio.run(serve(args.port, Options.from_args(args), args.idle_timeout))


if __name__ == "__main__":
    main()
