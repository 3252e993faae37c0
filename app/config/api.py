"""Settings of the api group: `ApiSettings`, read as `settings.api`."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from app.config.validators import within_published_bound


class ApiSettings(BaseModel):
    """API.

    The HTTP server: where it listens, the size of what it accepts, and its logs.
    """

    host: str = Field(
        default="127.0.0.1", description="where `python -m app serve` listens: address"
    )
    port: int = Field(
        default=8000,
        description="where `python -m app serve` listens: port (`make up` uses "
        "`COGNIS_API_PORT`, default 8000)",
    )
    max_content_chars: int = Field(
        default=8000, description="longest memory text (at most the published 8000)"
    )
    max_batch_size: int = Field(
        default=100, description="most memories per batch request (at most the published 100)"
    )
    max_metadata_bytes: int = Field(default=16_384, description="largest metadata object, as JSON")
    log_json: bool | None = Field(
        default=None, description="JSON log lines; unset: when stderr is not a terminal"
    )
    log_level: str = Field(default="INFO", description="log level")
    trace_content: bool = Field(
        default=False,
        description="traces (on when the `OTEL_*` variables ask for them: "
        "docs/observability/tracing.md) may carry memory content: a search's query, a "
        "message's text, request query strings; off: ids, counts and stage names only",
    )
    # Write deadlines (app/api/deadlines.py). Keep both below the clients' timeouts.
    write_deadline_ms: int = Field(
        default=30_000,
        ge=0,
        description="an interactive write (one memory, a PATCH, `POST /messages`' save) not done "
        "within this many ms of its arrival is refused with 503 + `Retry-After`, nothing "
        "written; a client's shorter `X-Cognis-Deadline-Ms` wins; 0: none",
    )
    idempotency_ttl_s: float = Field(
        default=86_400.0,
        gt=0,
        description="how long the response to a write sent with an `Idempotency-Key` is kept and "
        "replayed to a retry with the same key (app/idempotency); a retry after this is a new "
        "request",
    )
    console_session_hours: float = Field(
        default=12.0,
        gt=0,
        description="how long a console login lasts (then log in again); logging out ends it "
        "at once",
    )
    bulk_write_deadline_ms: int = Field(
        default=55_000,
        ge=0,
        description="the same for `POST /memories/batch` (imports have none: they commit batch "
        "by batch); keep it below your clients' timeouts (60 s in the Python client and MCP)",
    )

    _published_bounds = field_validator("max_content_chars", "max_batch_size")(
        within_published_bound
    )
