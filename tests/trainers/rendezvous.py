#!/usr/bin/env python
"""A real rendezvous over TCP, standard library only: every replica meets every peer.

Each replica reads TF_CONFIG, listens on 0.0.0.0:<its own port> (2222 on the
docker backend), and connects to every peer's address (retrying until a
deadline): it sends `HELLO <me>` and reads `HI <peer>` back, so both sides see
the exchange. When a replica has reached every peer and heard from every peer
it prints one JSON line:

  {"me": "worker:0", "hostname": ..., "listen": ..., "reached": {address: peer},
   "heard": [peer, ...], "tf_config_task": {...}}

then, unless it is the primary, tells the primary `DONE <me>` and exits 0. The
primary exits 0 once it has its own report and a DONE from every peer, so every
replica has finished its rendezvous before the job succeeds. If AIP_MODEL_DIR is
set, the primary also writes its report to AIP_MODEL_DIR/rendezvous.json.

Args: --deadline SECONDS (default 60): exit 1 naming what is missing.
"""
import argparse
import json
import os
import socket
import sys
import threading
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--deadline", type=float, default=60.0)
    args = parser.parse_args()
    deadline = time.monotonic() + args.deadline

    tf_config = json.loads(os.environ["TF_CONFIG"])
    task = tf_config["task"]
    me = f"{task['type']}:{task['index']}"
    members = {f"{kind}:{i}": address for kind, addresses in tf_config["cluster"].items()
               for i, address in enumerate(addresses)}
    peers = {name: address for name, address in members.items() if name != me}
    primary = next(name for name in members if name.split(":")[0] in ("chief", "master"))
    port = int(members[me].rsplit(":", 1)[1])

    heard, done = set(), set()
    lock = threading.Lock()
    server = socket.create_server(("0.0.0.0", port), reuse_port=False)
    server.settimeout(0.5)

    def serve():
        while time.monotonic() < deadline:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                line = conn.makefile("r").readline().split()
                if len(line) == 2 and line[0] == "HELLO":
                    conn.sendall(f"HI {me}\n".encode())
                    with lock:
                        heard.add(line[1])
                elif len(line) == 2 and line[0] == "DONE":
                    with lock:
                        done.add(line[1])

    threading.Thread(target=serve, daemon=True).start()
    print(f"{me}: listening on 0.0.0.0:{port}; peers {json.dumps(peers)}", flush=True)

    reached = {}
    for name, address in sorted(peers.items()):
        host, peer_port = address.rsplit(":", 1)
        while True:
            try:
                with socket.create_connection((host, int(peer_port)), timeout=2) as conn:
                    conn.sendall(f"HELLO {me}\n".encode())
                    reply = conn.makefile("r").readline().split()
                if reply[:1] == ["HI"]:
                    reached[address] = reply[1]
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                print(f"{me}: could not reach {name} at {address}", file=sys.stderr, flush=True)
                return 1
            time.sleep(0.2)

    while True:
        with lock:
            missing = set(peers) - heard
        if not missing:
            break
        if time.monotonic() > deadline:
            print(f"{me}: never heard from {sorted(missing)}", file=sys.stderr, flush=True)
            return 1
        time.sleep(0.1)

    report = {"me": me, "hostname": socket.gethostname(), "listen": members[me], "reached": reached,
              "heard": sorted(heard), "tf_config_task": task}
    print(json.dumps(report), flush=True)

    if me != primary:
        host, primary_port = members[primary].rsplit(":", 1)
        with socket.create_connection((host, int(primary_port)), timeout=5) as conn:
            conn.sendall(f"DONE {me}\n".encode())
        return 0

    while True:
        with lock:
            waiting = set(peers) - done
        if not waiting:
            break
        if time.monotonic() > deadline:
            print(f"{me}: no DONE from {sorted(waiting)}", file=sys.stderr, flush=True)
            return 1
        time.sleep(0.1)
    model_dir = os.environ.get("AIP_MODEL_DIR")
    if model_dir:
        os.makedirs(model_dir, exist_ok=True)
        with open(os.path.join(model_dir, "rendezvous.json"), "w") as f:
            json.dump(report, f)
    print(f"{me}: rendezvous complete with {len(peers)} peers", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
