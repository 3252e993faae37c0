"""Settings of the keys group: `KeySettings`, read as `settings.keys`."""

from __future__ import annotations

from pydantic import BaseModel, Field

# The development key is accepted only while no key hashes are configured; start-up warns loudly.
DEV_API_KEY = "cognis-dev-key"


class KeySettings(BaseModel):
    """Keys.

    Who may call: the default tenant's API keys, the admin keys that manage tenants and their
    keys (`/admin/v1`), the keys of `/metrics`, and a rate limit per key.
    """

    api_key_hashes: str = Field(
        default="",
        description="comma-separated SHA-256 hex digests of accepted keys of the default "
        'tenant (`printf %s "$KEY" | sha256sum`); with no API or admin key, the development '
        "key `cognis-dev-key` is accepted (start-up warns)",
    )
    admin_key_hashes: str = Field(
        default="",
        description="the same for admin keys (`/admin/v1`: tenants and their keys); empty: the "
        "admin API is off",
    )
    metrics_key_hashes: str = Field(
        default="",
        description="SHA-256 digests of the keys that may read `/metrics`; empty: it is open",
    )
    rate_limit_per_s: float = Field(
        default=0.0,
        ge=0.0,
        description="per-key token bucket in each API process, requests/s on average; over "
        "it: 429 with `Retry-After`; 0: no limit",
    )
    rate_limit_burst: int | None = Field(
        default=None,
        ge=1,
        description="the bucket's size, the longest burst; unset: one second's worth",
    )

    @property
    def api_key_hash_list(self) -> tuple[str, ...]:
        return _hash_list(self.api_key_hashes)

    @property
    def admin_key_hash_list(self) -> tuple[str, ...]:
        return _hash_list(self.admin_key_hashes)

    @property
    def metrics_key_hash_list(self) -> tuple[str, ...]:
        return _hash_list(self.metrics_key_hashes)

    @property
    def dev_key_enabled(self) -> bool:
        return not self.api_key_hash_list and not self.admin_key_hash_list


def _hash_list(hashes: str) -> tuple[str, ...]:
    return tuple(h.strip().lower() for h in hashes.split(",") if h.strip())
