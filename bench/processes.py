"""What runs beside a bench: `make up`'s API and model service (by their pid files), and the
resident memory of each process a report names."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
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


def _cpu_ticks(pid: int) -> int | None:
    """User + system clock ticks the process has used so far; None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of all cores since boot (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


@dataclass(slots=True)
class Quiet:
    """What a wait for quiet found: whether it came, after how long, and the last interval's
    CPU use of the model service (cores) and of the whole machine (fraction of all cores)."""

    reached: bool
    waited_s: float
    model_cores: float | None
    machine_busy: float

    def describe(self) -> str:
        model = (
            "no model service running"
            if self.model_cores is None
            else f"model service {self.model_cores:.2f} cores"
        )
        state = "quiet" if self.reached else "NOT quiet (measuring anyway)"
        return f"{state} after {self.waited_s:.0f} s: {model}, machine {self.machine_busy:.0%} busy"


def wait_for_quiet(
    timeout_s: float = 300.0,
    interval_s: float = 2.0,
    model_cores: float = 0.1,
    machine_busy: float = 0.25,
) -> Quiet:
    """Until `make up`'s model service has used under `model_cores` of a core and the whole
    machine under `machine_busy` of its cores over one `interval_s` (its background work, a
    sentence backlog, done; no other load), or `timeout_s`: a raw figure measured beside a
    busy model service is a fraction of the machine, not its limit (issue 56, item 5)."""
    pid = make_up_processes().get("model service")
    hz = os.sysconf("SC_CLK_TCK")
    started = time.monotonic()
    while True:
        before, machine_before = (_cpu_ticks(pid) if pid else None), _machine_ticks()
        time.sleep(interval_s)
        after, machine_after = (_cpu_ticks(pid) if pid else None), _machine_ticks()
        model = None if before is None or after is None else (after - before) / hz / interval_s
        busy = (machine_after[0] - machine_before[0]) / max(1, machine_after[1] - machine_before[1])
        waited = time.monotonic() - started
        reached = (model is None or model < model_cores) and busy < machine_busy
        if reached or waited >= timeout_s:
            return Quiet(reached, waited, model, busy)
