"""The relay's and the ingestion worker's heartbeat (app/heartbeat.py), which the chart's liveness
probes read: it goes on while their loops go round and stops when one hangs.

The processes are the real `python -m app relay` and `python -m app worker` against the test
Postgres and OpenSearch; a hung process is one stopped with SIGSTOP (every loop frozen, as a
process stuck in a call that never returns). A single hung loop among several is a worker
whose `run_once` never returns on one loop, in this process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import IngestSettings
from app.heartbeat import Heartbeats, read_heartbeats
from app.ingest.worker import IngestWorker
from tests import services
from tests.conftest import LOG_DIR, ROOT, _alembic_here, one_worker_at_a_time, run_cli

MAX_AGE_S = 3.0


def heartbeat_check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The probe's command, as the chart runs it."""
    return run_cli(env, "app", "heartbeat-check", timeout=60)


def wait_for_check(env: dict[str, str], passing: bool, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while True:
        result = heartbeat_check(env)
        if (result.returncode == 0) == passing:
            return result.stdout
        if time.monotonic() > deadline:
            raise AssertionError(f"check still {result.returncode}: {result.stdout}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def background_env(service_urls: services.ServiceUrls) -> dict[str, str]:
    """What the relay and worker pods get: the worker role's URL only (no request role, no
    owner), the schema at head. Built without the run's embedding server: neither process
    embeds while the queue is empty."""
    owner = service_urls.database_url
    with one_worker_at_a_time("migrations"):
        _alembic_here(owner, "upgrade", "head")
        roles = asyncio.run(services.create_service_roles(owner))
    env = {k: v for k, v in os.environ.items() if not k.startswith("COGNIS_")}
    env.update(
        {
            "COGNIS_DATABASE_URL": roles.worker_url,
            "COGNIS_OPENSEARCH_URL": service_urls.opensearch_url,
            "COGNIS_OPENSEARCH_INDEX": "cognis-heartbeat-test",
            "COGNIS_EMBEDDING_BACKEND": "http",
            "COGNIS_EMBEDDING_HTTP_URL": "http://127.0.0.1:9/v1",
            "COGNIS_RELAY_POLL_INTERVAL_S": "0.5",
            "COGNIS_INGEST_POLL_INTERVAL_S": "0.5",
            "COGNIS_EXPIRY_REAP_INTERVAL_S": "0",
            "COGNIS_SENTENCE_VECTORS": "false",
            "COGNIS_ENTITIES": "false",
            "COGNIS_HEARTBEAT_MAX_AGE_S": str(MAX_AGE_S),
            "HF_HUB_OFFLINE": "1",
        }
    )
    return env


@pytest.fixture(params=["relay", "worker"])
def background_process(
    request: pytest.FixtureRequest, background_env: dict[str, str], tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, str]]]:
    env = {**background_env, "COGNIS_HEARTBEAT_DIR": str(tmp_path / "heartbeat")}
    # A file an earlier run of the container left: the new process removes it.
    (tmp_path / "heartbeat").mkdir()
    (tmp_path / "heartbeat" / "ingest-7").touch()
    os.utime(tmp_path / "heartbeat" / "ingest-7", (0, 0))
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    with (LOG_DIR / f"test-heartbeat-{request.param}.log").open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", request.param],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield process, env
        finally:
            process.send_signal(signal.SIGCONT)
            services.terminate(process)


def test_a_hung_process_fails_the_check_and_a_running_one_passes(
    background_process: tuple[subprocess.Popen[bytes], dict[str, str]],
) -> None:
    process, env = background_process
    passing = wait_for_check(env, passing=True)
    assert "ingest-7" not in passing
    expected = "relay" if process.args[-1] == "relay" else "ingest-0"  # type: ignore[index]
    assert expected in passing
    # Still passing a few max ages on: an idle loop beats at every poll.
    time.sleep(2 * MAX_AGE_S)
    assert heartbeat_check(env).returncode == 0, process.poll()

    process.send_signal(signal.SIGSTOP)
    started = time.monotonic()
    failing = wait_for_check(env, passing=False, timeout=MAX_AGE_S + 30)
    assert time.monotonic() - started >= MAX_AGE_S - 1.0
    assert "(stale)" in failing
    process.send_signal(signal.SIGCONT)
    wait_for_check(env, passing=True, timeout=30)


def test_the_command_line_check_and_no_heartbeat_dir(background_env: dict[str, str]) -> None:
    """Without COGNIS_HEARTBEAT_DIR there is nothing to prove: exit 2, not a silent pass."""
    result = heartbeat_check(background_env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "COGNIS_HEARTBEAT_DIR" in result.stdout


class _OneLoopHangs(IngestWorker):
    """A worker whose third `run_once` (one of its loops) never returns."""

    calls = 0

    async def run_once(self) -> bool:
        type(self).calls += 1
        if type(self).calls == 3:
            await asyncio.Event().wait()
        return False


async def test_one_hung_loop_of_several_goes_stale_alone(tmp_path: Path) -> None:
    settings = IngestSettings(ingest_worker_concurrency=3, ingest_poll_interval_s=0.05)
    worker = _OneLoopHangs(None, None, settings)  # type: ignore[arg-type]
    heartbeats = Heartbeats(tmp_path)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run_forever(stop, heartbeats))
    await asyncio.sleep(1.5)
    state = read_heartbeats(tmp_path, max_age_s=1.0)
    stop.set()
    task.cancel()
    assert set(state.ages_s) == {"ingest-0", "ingest-1", "ingest-2"}
    assert len(state.stale) == 1, state
    assert not state.alive
    for name in set(state.ages_s) - set(state.stale):
        assert state.ages_s[name] < 0.5, state
