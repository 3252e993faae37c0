"""Requests as a well-behaved client sends them, for every bench: a 503 or 429 is sent again
after its Retry-After (the model or a store was busy: a state that passes), a batch the server
accepts as a job (202: more model work than its deadline allows) is waited for at its
Location, and a batch an older server refuses for that (413) is sent again in the parts that
fit (`fitting_memories`; halves when a server does not say). A batch that misses its
deadline BATCH_DEADLINE_MISSES times in a row (503 `deadline_ms`: the model is shared with
other work for that long) is sent in halves too: alone it would fit, but not in its share of a
busy model. What a bench measures is then what a client gets, retries included; the retries
are counted so the report can say so.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import httpx

BUSY = (429, 503)
MAX_ATTEMPTS = 20
BATCH_DEADLINE_MISSES = 3


@dataclass
class Retries:
    """What the benches' clients had to do beyond one request per write."""

    busy: int = 0  # 503/429 waited out
    splits: int = 0  # batches sent again in parts (413, or deadlines missed in a row)
    jobs: int = 0  # batches accepted as jobs (202) and waited for

    def describe(self) -> str:
        return (
            f"{self.busy} busy answers (503/429) waited out, {self.splits} batches split "
            f"(413 or repeated deadline misses), {self.jobs} batches written by a job (202)"
        )


RETRIES = Retries()


def _wait_s(response: httpx.Response) -> float:
    try:
        return max(0.05, float(response.headers.get("Retry-After", "1")))
    except ValueError:
        return 1.0


def _missed_deadline(response: httpx.Response) -> bool:
    """503 Deadline exceeded (it carries `deadline_ms`), not another busy answer."""
    if response.status_code != 503:
        return False
    try:
        return "deadline_ms" in response.json()
    except ValueError:
        return False


def _parts(response: httpx.Response, batch: list[Any]) -> list[list[Any]] | None:
    """The parts to send instead of a batch refused with 413 (or that kept missing its
    deadline), or None if it cannot be split."""
    if len(batch) < 2 or not (response.status_code == 413 or _missed_deadline(response)):
        return None
    fitting = response.json().get("fitting_memories")
    size = fitting if isinstance(fitting, int) and 1 <= fitting < len(batch) else len(batch) // 2
    return [batch[start : start + size] for start in range(0, len(batch), size)]


def _stop_waiting(response: httpx.Response, batch: list[Any] | None, misses: int) -> bool:
    """Whether to stop sending again: the answer is not a busy one, or it is a batch's
    BATCH_DEADLINE_MISSES-th missed deadline (then it is sent in halves instead)."""
    if response.status_code not in BUSY:
        return True
    return batch is not None and len(batch) > 1 and misses >= BATCH_DEADLINE_MISSES


async def _post_waiting(
    http: httpx.AsyncClient, path: str, batch: list[Any] | None = None, **kwargs: Any
) -> httpx.Response:
    """POST until the answer is not a busy one (or MAX_ATTEMPTS; see _stop_waiting)."""
    misses = 0
    for _ in range(MAX_ATTEMPTS):
        response = await http.post(path, **kwargs)
        misses += _missed_deadline(response)
        if _stop_waiting(response, batch, misses):
            break
        RETRIES.busy += 1
        await asyncio.sleep(_wait_s(response))
    return response


async def post(http: httpx.AsyncClient, path: str, **kwargs: Any) -> httpx.Response:
    """POST with busy answers waited out; raises on any other error answer."""
    response = await _post_waiting(http, path, **kwargs)
    response.raise_for_status()
    return response


JOB_POLL_S = 0.5


def _job_items(job: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A batch job's memories once done (None while it runs); raises if it failed."""
    if job["status"] == "failed":
        raise RuntimeError(f"batch job {job['job_id']} failed: {job['error']}")
    return job["items"] if job["status"] == "done" else None


async def post_batch(
    http: httpx.AsyncClient, user_id: str, memories: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """POST /memories/batch as a client does: busy answers waited out, a job (202) waited
    for, 413 split."""
    path = f"/v1/users/{user_id}/memories/batch"
    response = await _post_waiting(http, path, memories, json={"memories": memories})
    if (parts := _parts(response, memories)) is not None:
        RETRIES.splits += 1
        return [item for part in parts for item in await post_batch(http, user_id, part)]
    response.raise_for_status()
    if response.status_code == 202:
        RETRIES.jobs += 1
        while True:
            job = (await get(http, response.headers["Location"])).json()
            if (items := _job_items(job)) is not None:
                return items
            await asyncio.sleep(JOB_POLL_S)
    items = response.json()["items"]
    return items


async def get(http: httpx.AsyncClient, path: str) -> httpx.Response:
    """GET with busy answers waited out; raises on any other error answer."""
    for _ in range(MAX_ATTEMPTS):
        response = await http.get(path)
        if response.status_code not in BUSY:
            break
        RETRIES.busy += 1
        await asyncio.sleep(_wait_s(response))
    response.raise_for_status()
    return response


def _post_waiting_sync(
    http: httpx.Client, path: str, batch: list[Any] | None = None, **kwargs: Any
) -> httpx.Response:
    misses = 0
    for _ in range(MAX_ATTEMPTS):
        response = http.post(path, **kwargs)
        misses += _missed_deadline(response)
        if _stop_waiting(response, batch, misses):
            break
        RETRIES.busy += 1
        time.sleep(_wait_s(response))
    return response


def post_sync(http: httpx.Client, path: str, **kwargs: Any) -> httpx.Response:
    """`post` for a blocking client."""
    response = _post_waiting_sync(http, path, **kwargs)
    response.raise_for_status()
    return response


def post_batch_sync(
    http: httpx.Client, user_id: str, memories: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """`post_batch` for a blocking client."""
    path = f"/v1/users/{user_id}/memories/batch"
    response = _post_waiting_sync(http, path, memories, json={"memories": memories})
    if (parts := _parts(response, memories)) is not None:
        RETRIES.splits += 1
        return [item for part in parts for item in post_batch_sync(http, user_id, part)]
    response.raise_for_status()
    if response.status_code == 202:
        RETRIES.jobs += 1
        while True:
            polled = http.get(response.headers["Location"])
            if polled.status_code in BUSY:
                RETRIES.busy += 1
                time.sleep(_wait_s(polled))
                continue
            polled.raise_for_status()
            if (items := _job_items(polled.json())) is not None:
                return items
            time.sleep(JOB_POLL_S)
    items = response.json()["items"]
    return items
