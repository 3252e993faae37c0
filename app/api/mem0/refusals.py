"""A write refused for load, as mem0's client can act on it.

Elsewhere a write whose deadline passed while the model was busy is a 503 with Retry-After
(app/api/deadlines.py). mem0's client turns a 503 into a NetworkError and drops the header; it
keeps Retry-After only from a 429 (a RateLimitError whose `debug_info["retry_after"]` says
when to come back). So on mem0's routes the same refusal is a 429 with the same Retry-After and
detail: the load is this service's, not the key's rate, and the title says so. Nothing of the
write was saved, so sending it again after that many seconds is safe.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response
from litestar.status_codes import HTTP_429_TOO_MANY_REQUESTS

from app.api.deadlines import CLIENT_ADVICE
from app.api.problems import DEFAULT_RETRY_AFTER_S, problem
from app.errors import DeadlineExceededError


def on_busy(request: Request, exc: DeadlineExceededError) -> Response[dict[str, Any]]:
    retry_after = exc.retry_after_s or DEFAULT_RETRY_AFTER_S
    return problem(
        request,
        HTTP_429_TOO_MANY_REQUESTS,
        "Busy: write refused for load",
        exc.detail + CLIENT_ADVICE[DeadlineExceededError],
        headers={"Retry-After": str(retry_after)},
        retry_after=retry_after,
        **exc.extra,
    )


MEM0_HANDLERS: dict[Any, Any] = {DeadlineExceededError: on_busy}
