"""Python client for Cognis Memory: sync and async clients, typed results, a LangGraph store."""

from cognis_client._calls import RetryPolicy, new_idempotency_key
from cognis_client.client import AsyncCognisClient, CognisClient
from cognis_client.errors import (
    AuthenticationError,
    CognisError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    ServerError,
    ServiceUnavailableError,
)
from cognis_client.models import (
    Decision,
    Erasure,
    History,
    Job,
    Memory,
    MemoryChanges,
    MemoryInput,
    MemoryPage,
    Message,
    SearchHit,
    SearchResult,
    StageScore,
    UserPage,
    UserSummary,
)

__all__ = [
    "AsyncCognisClient",
    "AuthenticationError",
    "CognisClient",
    "CognisError",
    "ConflictError",
    "Decision",
    "Erasure",
    "History",
    "InvalidRequestError",
    "Job",
    "Memory",
    "MemoryChanges",
    "MemoryInput",
    "MemoryPage",
    "Message",
    "NotFoundError",
    "RetryPolicy",
    "SearchHit",
    "SearchResult",
    "ServerError",
    "ServiceUnavailableError",
    "StageScore",
    "UserPage",
    "UserSummary",
    "new_idempotency_key",
]
