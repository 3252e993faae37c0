"""One place that turns errors into RFC 9457 application/problem+json responses."""

from __future__ import annotations

import re
from typing import Any

import structlog
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR, HTTP_503_SERVICE_UNAVAILABLE

from app.errors import CognisError
from app.outages import unavailable_store

log = structlog.get_logger(__name__)

PROBLEM_JSON = "application/problem+json"
DEFAULT_RETRY_AFTER_S = 5


def problem(
    request: Request,
    status: int,
    title: str,
    detail: str,
    *,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Response[dict[str, Any]]:
    body = {
        "type": "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
        "instance": request.url.path,
        **extra,
    }
    return Response(content=body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def on_domain_error(
    request: Request, exc: CognisError, advice: str = ""
) -> Response[dict[str, Any]]:
    """A domain error as problem+json; `advice`, what an HTTP client does about it, follows
    its detail (app/api/deadlines.py adds it to the scheduler's refusals)."""
    headers = None
    if exc.status_code == HTTP_503_SERVICE_UNAVAILABLE or exc.retry_after_s is not None:
        # A 503 (or a 429) is temporary by definition: tell clients when to come back rather
        # than hammer.
        headers = {"Retry-After": str(exc.retry_after_s or DEFAULT_RETRY_AFTER_S)}
    detail = exc.detail + advice
    return problem(request, exc.status_code, exc.title, detail, headers=headers, **exc.extra)


_AT = re.compile(r"at `\$\.?([^`]*)`")


def on_validation_error(request: Request, exc: ValidationException) -> Response[dict[str, Any]]:
    errors = [e for e in (exc.extra if isinstance(exc.extra, list) else []) if isinstance(e, dict)]
    detail = "; ".join(f"{e.get('key') or 'body'}: {e.get('message')}" for e in errors) or str(
        exc.detail
    )
    # Name the field as domain errors do: msgspec points at it (`... - at `$.memories[1].scope``),
    # a query or path parameter is its key.
    field = None
    if errors:
        first = errors[0]
        at = _AT.search(str(first.get("message")))
        field = (at.group(1) or None) if at else first.get("key")
        field = None if field == "body" else field
    extra: dict[str, Any] = {"errors": errors}
    if field:
        extra["field"] = field
    return problem(request, exc.status_code, "Invalid request", detail, **extra)


def on_http_error(request: Request, exc: HTTPException) -> Response[dict[str, Any]]:
    title = {401: "Unauthorized", 404: "Not found", 405: "Method not allowed"}.get(
        exc.status_code, "Request error"
    )
    # The exception's headers are part of the answer: a 405's Allow (RFC 9110 requires it;
    # Litestar's router puts the route's methods there), a 401's WWW-Authenticate.
    return problem(request, exc.status_code, title, str(exc.detail), headers=exc.headers)


def on_unexpected_error(request: Request, exc: Exception) -> Response[dict[str, Any]]:
    """The last handler: a store outage is a 503 the client may retry; anything else a 500."""
    store = unavailable_store(exc)
    if store is not None:
        log.warning(
            "api.store_unavailable", path=request.url.path, store=store, error=type(exc).__name__
        )
        return problem(
            request,
            HTTP_503_SERVICE_UNAVAILABLE,
            "Store unavailable",
            f"{store} cannot be reached; the request was not completed, send it again later",
            headers={"Retry-After": str(DEFAULT_RETRY_AFTER_S)},
            store=store,
        )
    log.exception("api.unhandled_error", path=request.url.path, error=str(exc))
    return problem(
        request,
        HTTP_500_INTERNAL_SERVER_ERROR,
        "Internal server error",
        "the server failed to handle this request; it has been logged",
    )


EXCEPTION_HANDLERS: dict[Any, Any] = {
    CognisError: on_domain_error,
    ValidationException: on_validation_error,
    HTTPException: on_http_error,
    Exception: on_unexpected_error,
}
