"""Settings of the relay group: `RelaySettings`, read as `settings.relay`."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from app.config.validators import empty_is_unset


class RelaySettings(BaseModel):
    """Relay.

    The outbox relay that carries committed changes to OpenSearch, the read-your-writes waits
    on it, and how an erasure is handed over. One batch is claimed in one transaction and sent
    as bulk requests.
    """

    relay_in_api: bool = Field(
        default=True, description="run the outbox relay inside the API process"
    )
    relay_batch_size: int = Field(
        default=1000, description="outbox events claimed per batch (one transaction)"
    )
    opensearch_bulk_max_docs: int = Field(
        default=1000, description="most documents in one bulk request; a batch is split"
    )
    opensearch_bulk_max_bytes: int = Field(
        default=5_000_000, description="largest payload of one bulk request; a batch is split"
    )
    # OpenSearch indexes concurrent requests on several write threads; external versions keep
    # the result right whichever request lands first.
    opensearch_bulk_concurrency: int = Field(
        default=2, description="bulk requests of one batch in flight at once"
    )
    relay_poll_interval_s: float = Field(
        default=2.0, description="polling fallback when no NOTIFY arrives"
    )
    relay_backoff_base_s: float = Field(
        default=1.0,
        description="first retry's backoff after a failed delivery (exponential, jittered)",
    )
    relay_backoff_max_s: float = Field(default=300.0, description="longest retry backoff")
    webhook_allow_private: bool = Field(
        default=False,
        description="accept webhook URLs whose host resolves to an address that is not "
        "globally reachable (loopback, private, link-local, carrier-grade NAT...), when "
        "subscribing and when delivering (refused by default: a tenant must not reach the "
        "internal network through the service)",
    )
    webhook_max_attempts: int = Field(
        default=8, ge=1, description="POSTs of one webhook event before it is marked dead"
    )
    webhook_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="how long a webhook receiver has to answer one POST, connection and whole "
        "answer included",
    )
    webhook_concurrency: int = Field(
        default=50,
        ge=1,
        description="webhook POSTs one dispatcher has in flight at once, all tenants together",
    )
    webhook_tenant_concurrency: int = Field(
        default=4,
        ge=1,
        description="webhook POSTs one dispatcher has in flight at once for one tenant: a "
        "tenant's slow receivers take at most this many slots, the rest go to other tenants "
        "(claimed round-robin)",
    )
    webhook_backoff_base_s: float = Field(
        default=2.0,
        gt=0,
        description="first retry's backoff after a failed webhook POST (doubling, jittered, "
        "capped by COGNIS_RELAY_BACKOFF_MAX_S)",
    )
    erase_handoff_s: float = Field(
        default=30.0,
        description="how long background relays leave a user erasure to the request that made it",
    )
    # Longer than any write can take from its start to its transaction (an import included).
    erase_tombstone_s: float = Field(
        default=86400.0,
        gt=0,
        description="how long an erase's tombstone is kept: until then a write of that user "
        "that began before the erase and reaches its transaction only now is refused (409 "
        "`User erased`); a write that began after the erase is accepted at once",
    )
    # Expired memories are hidden at once by every read; the reaper only frees the space.
    expiry_reap_interval_s: float = Field(
        default=60.0,
        ge=0,
        description="how often the expiry reaper (beside the relay) removes expired memories "
        "from both stores; 0: never",
    )
    expiry_reap_batch_size: int = Field(
        default=500,
        ge=1,
        description="expired memory versions the reaper removes per transaction",
    )
    index_wait_max_ms: int = Field(
        default=5000,
        description='default and maximum `wait_timeout_ms` of `consistency: "indexed"` and '
        "`?wait_for=indexed`",
    )
    index_wait_poll_ms: int = Field(
        default=50,
        description="how often such a wait re-reads the outbox (a delivery in the same process "
        "wakes it sooner)",
    )
    index_check_interval_s: float = Field(
        default=30.0,
        ge=0,
        description="how often the API compares the BM25 index's document count with the memory "
        "versions Postgres says it should hold (`/ready` `index`; searches say `stale` while it "
        "is behind); 0: never",
    )
    index_requeue_empty: bool = Field(
        default=True,
        description="when that check finds the index empty while Postgres holds delivered "
        "memories (a new cluster, a deleted index), re-queue every memory version for "
        "indexing; false: only report it (`make reindex` rebuilds it)",
    )
    # Liveness of processes that serve no HTTP (app/heartbeat.py; the chart's probes).
    heartbeat_dir: str | None = Field(
        default=None,
        description="a directory where the outbox relay and each ingestion worker loop touch "
        "a file of their own every time round (`python -m app heartbeat-check` fails when one "
        "is older than `COGNIS_HEARTBEAT_MAX_AGE_S`: a hung loop); unset: no heartbeat",
    )
    heartbeat_max_age_s: float = Field(
        default=300.0,
        gt=0,
        description="the oldest beat `python -m app heartbeat-check` accepts: longer than one "
        "batch can take (an LLM call with its retries included)",
    )

    @field_validator("heartbeat_dir", mode="before")
    @classmethod
    def _empty_heartbeat_dir_is_unset(cls, value: object) -> object:
        return empty_is_unset(value)
