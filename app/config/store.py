"""Settings of the stores group: `StoreSettings`, read as `settings.store`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator

from app.config.validators import empty_is_unset


class StoreSettings(BaseModel):
    """Stores.

    Postgres, the system of record, and OpenSearch, the BM25 index the outbox relay feeds.
    """

    database_url: SecretStr = Field(
        description="`postgresql+asyncpg://user:pw@host:port/db`: the role requests run as (a "
        "member of `cognis_rw`, e.g. `cognis_app`; never a superuser)"
    )
    # Background work claims rows of every tenant, so it needs a role in cognis_background.
    worker_database_url: SecretStr | None = Field(
        default=None,
        description="the role of the relay, the ingestion workers and reindex (a member of "
        "`cognis_background`, e.g. `cognis_worker`); unset: `COGNIS_DATABASE_URL`, whose role "
        "must then be in `cognis_background` too",
    )
    migration_database_url: SecretStr | None = Field(
        default=None,
        description="Alembic's role: the tables' owner, with CREATEDB but no CREATEROLE (the "
        "role-admin step makes the groups; docs/operations.md, Roles); unset: "
        "`COGNIS_DATABASE_URL`",
    )
    backup_database_url: SecretStr | None = Field(
        default=None,
        description="the role `python -m app backup` dumps as: BYPASSRLS and a member of "
        "`pg_read_all_data`, nothing else (`cognis_backup`, made by `make up`; "
        "docs/operations.md)",
    )
    db_pool_size: int = Field(default=10, description="connection pool size")
    db_pooler: Literal["none", "transaction"] = Field(
        default="none",
        description="`transaction`: the database URLs reach Postgres through a pooler in "
        'transaction mode (PgBouncer; docs/deployment.md, "Connections"): no prepared '
        "statement outlives its transaction and no session setting is sent, so a server "
        "connection serves any client between transactions",
    )
    direct_database_url: SecretStr | None = Field(
        default=None,
        description="Postgres itself, past the pooler, with the role of "
        "`COGNIS_DATABASE_URL`: the LISTEN of the relay for new outbox events and of the "
        "webhook dispatcher for new deliveries (through a transaction-mode pooler they would "
        "hear nothing, and poll); unset: "
        "`COGNIS_DATABASE_URL`",
    )
    read_database_url: SecretStr | None = Field(
        default=None,
        description="a read replica of the same database (Aurora's reader endpoint, a "
        "streaming replica; `make up-cluster` makes one) with the role of `COGNIS_DATABASE_URL`: "
        "searches, lists, history, exports and the user list read from it; unset: the writer",
    )
    replica_wait_max_ms: int = Field(
        default=1000,
        ge=0,
        description="how long a read that must see the writes committed before it (lists, "
        'history, exports, `consistency: "indexed"` searches) waits for the replica to replay '
        "them before the writer serves it",
    )
    replica_retry_s: float = Field(
        default=5.0,
        gt=0,
        description="after the replica fails to answer, reads go to the writer for this long "
        "before the replica is tried again",
    )
    replica_connect_timeout_s: float = Field(
        default=2.0,
        gt=0,
        description="bound of a connection attempt to the replica (a dead host answers nothing)",
    )

    @field_validator("read_database_url", "direct_database_url", mode="before")
    @classmethod
    def _empty_read_database_is_unset(cls, value: object) -> object:
        return empty_is_unset(value)

    opensearch_url: str = Field(
        default="http://127.0.0.1:59200",
        description="OpenSearch endpoint, or several nodes' endpoints, comma-separated: a "
        "request that finds one node dead is retried on the next (`make up-cluster` runs three)",
    )
    opensearch_username: str | None = Field(
        default=None, description="basic auth user, if the cluster needs one"
    )
    opensearch_password: SecretStr | None = Field(
        default=None, description="basic auth password, with `COGNIS_OPENSEARCH_USERNAME`"
    )
    opensearch_index: str = Field(default="cognis-memories", description="index name")
    opensearch_timeout_s: float = Field(default=5.0, description="per-request timeout")
    opensearch_refresh_interval: str = Field(
        default="250ms",
        description="how soon a delivered memory is BM25-searchable (set when the index is "
        "created)",
    )
    opensearch_shards: int = Field(
        default=1,
        ge=1,
        description="primary shards of the index, set when it is created (a change needs "
        "`python -m app reindex --recreate`); one holds some tens of millions of memories "
        "(docs/benchmarks/scale-out.md)",
    )
    opensearch_replicas: int | None = Field(
        default=None,
        ge=0,
        description="copies of each shard on other nodes, so a node lost loses no part of the "
        "index; applied to an existing index at start-up; unset: 1 when the cluster has two or "
        "more data nodes, else 0 (and never lowered on an existing index)",
    )
