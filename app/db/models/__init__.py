"""ORM models: every table the service owns. Importing the package registers them all on
`Base.metadata`, the metadata Alembic compares (migrations/env.py); each module holds the
tables of one part of the service."""

from app.db.models.base import NAMING_CONVENTION, Base, in_list, tenant_column
from app.db.models.console import ConsoleSession
from app.db.models.entities import Entity, MemoryEntity
from app.db.models.erasure import MemoryExpiry, ScopeErasure, UserErasure, UserLock
from app.db.models.ingest import EXTRACTORS, LLM_GATES, TASK_STATES, IngestDecision, IngestTask
from app.db.models.memories import Category, Memory, Message
from app.db.models.outbox import OUTBOX_OPS, OutboxEvent
from app.db.models.webhooks import WebhookAttempt, WebhookDelivery, WebhookSubscription
from app.db.models.writes import (
    BATCH_JOB_STATES,
    IDEMPOTENCY_STATES,
    BatchJob,
    IdempotencyKey,
)

__all__ = [
    "BATCH_JOB_STATES",
    "EXTRACTORS",
    "IDEMPOTENCY_STATES",
    "LLM_GATES",
    "NAMING_CONVENTION",
    "OUTBOX_OPS",
    "TASK_STATES",
    "Base",
    "BatchJob",
    "Category",
    "ConsoleSession",
    "Entity",
    "IdempotencyKey",
    "IngestDecision",
    "IngestTask",
    "Memory",
    "MemoryEntity",
    "MemoryExpiry",
    "Message",
    "OutboxEvent",
    "ScopeErasure",
    "UserErasure",
    "UserLock",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookSubscription",
    "in_list",
    "tenant_column",
]
