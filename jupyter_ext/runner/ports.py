"""Loopback ports for process replicas that no two runs on this machine share.

A free port that is only found and let go (bind to port 0, close) can be handed out
again before the replica binds it: to a parallel trial, or to any outgoing connection.
So a lease takes its ports
- below the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), which
  the kernel never hands out for connections or to a bind to port 0, and
- holds each one for the whole run with a lock every workbench process on this machine
  sees: an abstract Unix socket named `vtrain-port-<port>` (Linux; it goes with the
  process, however it dies), so every runner, in this process or another, skips it.
A port is also checked free (nothing is bound to it on any IPv4 address) when it is leased.
"""

from __future__ import annotations

import errno
import secrets
import socket
from pathlib import Path

from ..errors import BackendError

LOWEST = 10000  # below: well-known services' habits (8080, 8888, 5000, ...)
TRIES_PER_PORT = 200


class PortLease:
    """Ports held for one run until `release()`."""

    def __init__(self, count: int) -> None:
        self._locks: list[socket.socket] = []
        self.ports: list[int] = []
        low, high = _range()
        try:
            for _ in range(count):
                self.ports.append(self._take(low, high))
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        for lock in self._locks:
            lock.close()
        self._locks.clear()

    def _take(self, low: int, high: int) -> int:
        for _ in range(TRIES_PER_PORT):
            port = low + secrets.randbelow(high - low)
            lock = _lock(port)
            if lock is None:
                continue  # another run holds it
            if _free(port):
                self._locks.append(lock)
                return port
            lock.close()
        raise BackendError(f"no free port on 127.0.0.1 between {low} and {high - 1} for a replica "
                           f"after {TRIES_PER_PORT} tries")


def _range() -> tuple[int, int]:
    """[low, high) for leases: below the ephemeral range when there is room, else inside it."""
    try:
        first, last = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        first, last = 32768, 60999
    return (LOWEST, first) if first - LOWEST >= 1000 else (first, last + 1)


def _lock(port: int) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(f"\0vtrain-port-{port}")
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            return None
        raise
    return sock


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("0.0.0.0", port))  # conflicts with a listener on any address, loopback included
        except OSError:
            return False
    return True
