"""A free loopback port, for the processes the benchmarks and the tests start."""

from __future__ import annotations

import os
import socket

# "LOW-HIGH": take ports from this range only (a machine shared by several people, each
# given a range); unset: any port the OS picks.
PORTS_VARIABLE = "COGNIS_BENCH_PORTS"
# Ports of the range handed out by this process (free_port() twice before either is bound
# must not give the same one).
_given: set[int] = set()


def free_port() -> int:
    """A port nothing listens on now (a process started next binds it): the first free one of
    COGNIS_BENCH_PORTS not handed out before when it is set, else one the OS picks."""
    wanted = os.environ.get(PORTS_VARIABLE, "").strip()
    if not wanted:
        return _bound_port(0)
    low, _, high = wanted.partition("-")
    for port in range(int(low), int(high or low) + 1):
        if port in _given:
            continue
        try:
            _given.add(_bound_port(port))
        except OSError:
            continue
        return port
    raise RuntimeError(f"no free port in {PORTS_VARIABLE}={wanted}")


def _bound_port(port: int) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        return int(s.getsockname()[1])
