"""Settings of the retention group: `RetentionSettings`, read as `settings.retention`."""

from __future__ import annotations

from pydantic import BaseModel, Field


class RetentionSettings(BaseModel):
    """Retention.

    The retention job (app/db/retention.py) deletes rows whose use is over, in batches of one
    short transaction each, beside the outbox relay: at start-up, then every interval.
    `python -m app retention` (`make retention`) runs one pass.
    """

    retention_interval_s: float = Field(
        default=3600.0,
        ge=0,
        description="how often the retention job runs (and once at start-up) where the relay "
        "runs; 0: never (run `python -m app retention` instead)",
    )
    retention_batch_size: int = Field(
        default=1000,
        ge=1,
        le=100_000,
        description="most rows one delete removes, in a transaction of its own",
    )
    outbox_retention_hours: float = Field(
        default=24.0, description="delivered outbox events are deleted this long after delivery"
    )
    ingest_task_retention_days: float = Field(
        default=7.0,
        ge=0,
        description="finished ingestion tasks (done or failed) are deleted this long after they "
        "finished, and `GET .../jobs/{job_id}` then answers 404 (the messages and the decision "
        "audit trail stay); 0: kept forever",
    )
    batch_job_retention_days: float = Field(
        default=7.0,
        ge=0,
        description="finished batch jobs (done or failed) are deleted this long after they "
        "finished, and `GET .../memories/batch/jobs/{job_id}` then answers 404 (the memories "
        "stay); 0: kept forever",
    )
    webhook_retention_days: float = Field(
        default=7.0,
        ge=0,
        description="delivered webhook events are deleted, with their attempts, this long after "
        "delivery, and leave the delivery log (pending and dead ones stay); 0: kept forever",
    )
