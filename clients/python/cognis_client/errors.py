"""The server's application/problem+json answers as exceptions, one class per kind of failure."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx


class CognisError(Exception):
    """An error answer of the API; `detail` is the server's explanation, `problem` its body."""

    def __init__(self, status: int, title: str, detail: str, problem: dict[str, Any]) -> None:
        super().__init__(f"{status} {title}: {detail}")
        self.status = status
        self.title = title
        self.detail = detail
        self.problem = problem


class InvalidRequestError(CognisError):
    """400 or 422: the request itself is wrong; `problem["errors"]` lists fields when known."""


class AuthenticationError(CognisError):
    """401: no API key, or one the server does not accept."""


class NotFoundError(CognisError):
    """404: no such memory or job for this user (or it belongs to another user)."""


class ConflictError(CognisError):
    """409: the request conflicts with the current state (e.g. updating a superseded version)."""


class ServiceUnavailableError(CognisError):
    """503: a dependency is down; retried by the client, raised when the retries run out."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        problem: dict[str, Any],
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(status, title, detail, problem)
        self.retry_after_s = retry_after_s


class ServerError(CognisError):
    """Any other 5xx."""


_BY_STATUS: dict[int, type[CognisError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    404: NotFoundError,
    409: ConflictError,
    422: InvalidRequestError,
}


def retry_after_s(response: httpx.Response) -> float | None:
    """Retry-After in seconds: either delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_from_response(response: httpx.Response) -> CognisError:
    try:
        body = response.json()
    except ValueError:
        body = None
    problem: dict[str, Any] = body if isinstance(body, dict) else {}
    status = response.status_code
    title = str(problem.get("title") or response.reason_phrase or "HTTP error")
    detail = str(problem.get("detail") or response.text[:500])
    if status == 503:
        return ServiceUnavailableError(status, title, detail, problem, retry_after_s(response))
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else CognisError)
    return cls(status, title, detail, problem)
