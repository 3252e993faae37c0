"""The embedding scheduler: texts from concurrent callers (API requests, ingestion workers,
imports, the service's own background work) gathered into model calls, most urgent first and
fairly between tenants and users (docs/embedding.md, "Scheduling classes").

Four modules, one job each, lowest first:

- `work`: the vocabulary every caller speaks: whose work a text is (`Work`: its scheduling
  class, tenant, user) and until when its caller waits (`Deadline`);
- `fair_queue`: the waiting requests of one class, shared between tenants and then users by
  start-time fair queuing;
- `speed`: what a text costs and how fast the model is, learnt from its calls, and the time
  budget of a call that follows from it;
- `dispatcher`: the `MicroBatcher`, which forms each call from the queues within that budget,
  runs it in a worker thread, and reports what it did (`QueueObserver`, `BatchStats`).

The measurements behind the call budget and the speed estimate are in
docs/benchmarks/ingestion.md ("Mixed traffic"). The refusals here say what happened and what
would fit; what an HTTP client does about them is worded by the API (app/api/deadlines.py).
"""
