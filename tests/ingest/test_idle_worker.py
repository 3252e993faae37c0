"""The loop of the workers that wait for idle models (app/ingest/idle_worker.py), without the
stores: a batch only while every watched model has been idle long enough, at once again after
a batch that found work, a failed batch logged and retried, and a stop that ends the loop."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from app.ingest.idle_worker import IdleWorker


@dataclass
class Done:
    memories: int = 0


class Model:
    """An embedding model as the worker sees it: how long it has had no work."""

    def __init__(self, idle_s: float) -> None:
        self.idle = idle_s

    def idle_s(self) -> float:
        return self.idle


class Scripted(IdleWorker[Done]):
    """Answers each batch from a script (a number of memories, or an error to raise)."""

    events = "test"

    def __init__(self, script: list[int | Exception], models: list[Model], stop: asyncio.Event):
        super().__init__(models, idle_s=1.0, poll_s=0.05)  # type: ignore[arg-type]
        self.script = script
        self.batches = 0
        self.stop = stop

    def idle_report(self) -> Done:
        return Done()

    async def work(self) -> Done:
        self.batches += 1
        if not self.script:
            self.stop.set()
            return Done()
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return Done(step)


async def test_a_batch_runs_only_while_every_watched_model_is_idle() -> None:
    stop = asyncio.Event()
    busy, idle = Model(0.2), Model(5.0)
    worker = Scripted([3], [idle, busy], stop)
    assert not worker.model_idle()
    assert (await worker.run_once()).memories == 0 and worker.batches == 0
    busy.idle = 1.0
    assert worker.model_idle()
    assert (await worker.run_once()).memories == 3 and worker.batches == 1
    # No model to wait for: always idle.
    assert Scripted([], [], stop).model_idle()


async def test_work_goes_on_after_a_failure_and_the_loop_ends_on_stop() -> None:
    stop = asyncio.Event()
    worker = Scripted([2, RuntimeError("database away"), 1, 0], [Model(9.0)], stop)
    await asyncio.wait_for(worker.run_forever(stop), timeout=10)
    # 2, the failure, 1, the empty batch (then a pause), and the batch that set stop.
    assert worker.batches == 5 and worker.script == []
