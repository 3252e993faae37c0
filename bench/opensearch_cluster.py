"""The local 3-node OpenSearch cluster (scripts/opensearch-cluster.sh), driven from Python: for
bench/scale_out_opensearch.py and the tests in tests/cluster."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

from opensearchpy import AsyncOpenSearch

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = str(ROOT / "scripts" / "opensearch-cluster.sh")


class OpenSearchCluster:
    """Three OpenSearch processes on loopback; stopped by `stop` only if this object started
    them (a cluster already up is someone else's)."""

    def __init__(self) -> None:
        self.started_here = False

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(  # noqa: S603 - the project's own script
            ["bash", SCRIPT, *args],  # noqa: S607
            env=dict(os.environ),
            capture_output=True,
            text=True,
            check=False,
        )

    def start(self) -> None:
        self.started_here = self._run("status").returncode != 0
        started = self._run("start")
        if started.returncode != 0:
            raise RuntimeError(f"the OpenSearch cluster did not start:\n{started.stderr[-4000:]}")

    def stop(self) -> None:
        if self.started_here:
            self._run("stop")

    @property
    def urls(self) -> str:
        """COGNIS_OPENSEARCH_URL for the cluster: its three nodes, comma-separated."""
        return self._run("urls").stdout.strip()

    @property
    def hosts(self) -> list[str]:
        return self.urls.split(",")

    async def _run_async(self, *args: str) -> None:
        process = await asyncio.create_subprocess_exec(
            "bash",
            SCRIPT,
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, stderr = await process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"opensearch-cluster.sh {' '.join(args)}: {stderr.decode()[-3000:]}")

    async def kill_node(self, node: int) -> None:
        """kill -9 of node `node` (1-3)."""
        await self._run_async("kill-node", str(node))

    async def start_node(self, node: int) -> None:
        """Node `node` back; returns once the three nodes form the cluster again."""
        await self._run_async("start-node", str(node))


async def primary_node(client: AsyncOpenSearch, index: str) -> int:
    """The number (1-3) of the node holding the primary of the index's first shard."""
    shards = await client.cat.shards(index=index, format="json")
    for shard in shards:
        if shard["prirep"] == "p" and shard["shard"] == "0" and shard.get("node"):
            return int(str(shard["node"]).rsplit("-", 1)[1])
    raise RuntimeError(f"no started primary of {index}: {shards}")


async def wait_green(client: AsyncOpenSearch, index: str, timeout_s: float = 120) -> None:
    """Until every copy of the index's shards is assigned and started."""
    health = await client.cluster.health(
        index=index,
        wait_for_status="green",
        timeout=f"{int(timeout_s)}s",
        request_timeout=timeout_s + 10,
    )
    if health["status"] != "green":
        raise RuntimeError(f"{index} is {health['status']} after {timeout_s} s: {health}")
