"""What runs beside a bench: `make up`'s API and model service (by their pid files), and the
resident memory of each process a report names."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# `make up`'s processes, by the pid files scripts/api.sh and scripts/embedder.sh write.
MAKE_UP = {"make up API": "api.pid", "model service": "embedder.pid"}


def _local_dir() -> Path:
    return Path(os.environ.get("COGNIS_LOCAL_DIR", ROOT / ".local"))


def read_env(path: Path) -> dict[str, str]:
    """The settings of an env file the scripts write (`.local/cognis.env`)."""
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs if not k.lstrip().startswith("#")}


def rss_mib(pid: int) -> float | None:
    """The process's resident memory (VmRSS) in MiB; None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def make_up_processes() -> dict[str, int]:
    """`make up`'s processes that are alive now, by name."""
    alive = {}
    for name, pid_file in MAKE_UP.items():
        try:
            pid = int((_local_dir() / "run" / pid_file).read_text())
        except (OSError, ValueError):
            continue
        if rss_mib(pid) is not None:
            alive[name] = pid
    return alive


def describe_neighbours() -> str:
    running = make_up_processes()
    if not running:
        return "no `make up` service running (its API and model service are down)"
    shown = ", ".join(f"{name} (pid {pid})" for name, pid in running.items())
    return f"`make up`'s service running as a user has it: {shown}"


def resident_memory(own: dict[str, int]) -> str:
    """Each named process's RSS, `make up`'s included."""
    parts = []
    for name, pid in {**own, **make_up_processes()}.items():
        rss = rss_mib(pid)
        parts.append(f"{name} {rss:.0f} MiB" if rss is not None else f"{name} gone")
    return ", ".join(parts)
