"""`python -m jupyter_ext.service [--port N] [--read-quota N] [--ingestion-delay S] [--record-requests]`:
run the local service in the foreground.

Usually started detached by `vtrain service start` or the first local submit.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import signal

import tornado.httpserver
import tornado.netutil

from .. import paths
from . import daemon
from .app import make_app
from .emulation import Options, RequestRecord, add_arguments
from .jobs import JobManager
from .store import JobStore
from .tuning_jobs import TuningManager

HOST = "127.0.0.1"  # loopback only: local jobs run code as the user


async def serve(port: int, options: Options) -> None:
    token = secrets.token_urlsafe(32)
    database = paths.data_dir() / "jobs.sqlite"
    managers = [JobManager(JobStore(database), paths.jobs_dir()),
                TuningManager(JobStore(database, TuningManager.collection), paths.jobs_dir())]
    for manager in managers:
        for job_id in manager.recover():
            print(f"{manager.collection.kind} {job_id} was running when the service stopped: marked FAILED",
                  flush=True)
    sockets = tornado.netutil.bind_sockets(port, HOST)
    record = RequestRecord(daemon.runtime_dir() / "requests.jsonl") if options.record_requests else None
    server = tornado.httpserver.HTTPServer(make_app(managers, token, paths.jobs_dir(), options, record))
    server.add_sockets(sockets)
    endpoint = f"http://{HOST}:{sockets[0].getsockname()[1]}"
    daemon.write_runtime(endpoint, token, options)
    print(f"local Vertex AI service on {endpoint}", flush=True)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    try:
        await stopping.wait()
    finally:
        daemon.clear_runtime()
        server.stop()
        for manager in managers:  # running jobs are cancelled, their replicas stopped
            await loop.run_in_executor(None, manager.shutdown)
            manager.store.close()
        print("stopped", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m jupyter_ext.service")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    add_arguments(parser)
    args = parser.parse_args()
    asyncio.run(serve(args.port, Options.from_args(args)))


if __name__ == "__main__":
    main()
