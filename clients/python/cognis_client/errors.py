"""The server's application/problem+json answers as exceptions, one class per kind of failure,
and NoAnswerError for an attempt that got none: every failure of a call is a CognisError."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx


class CognisError(Exception):
    """An error answer of the API; `detail` is the server's explanation, `problem` its body.
    `idempotency_key`: the failed write's key, when it had one; sending the write again with it
    (`idempotency_key=`) never writes twice."""

    idempotency_key: str | None = None

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
    """409: the request conflicts with the current state (e.g. updating a deleted memory)."""


class PreconditionFailedError(ConflictError):
    """412: `if_match` named a version that is no longer the memory's current one (another
    writer replaced it); nothing was written. `current_version_id`: the version now current.
    A ConflictError, as a superseded version was before memory ids lasted."""

    @property
    def current_version_id(self) -> str | None:
        current = self.problem.get("current_version_id")
        return current if isinstance(current, str) else None


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


class RateLimitedError(ServiceUnavailableError):
    """429: this key sent more requests than its rate allows; retried by the client after the
    server's Retry-After, raised when the retries run out (or the wait is too long)."""


class ServerError(CognisError):
    """Any other 5xx."""


class NoAnswerError(CognisError):
    """No answer came: a timeout, or a connection refused or dropped. `may_have_written`: the
    call was a write whose request may have reached the server, so it may have happened; send
    it again with `idempotency_key` to be sure it happens exactly once. The transport's own
    error is the `__cause__`."""

    def __init__(
        self, error: Exception, *, may_have_written: bool, idempotency_key: str | None
    ) -> None:
        what = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        advice = ""
        if may_have_written:
            advice = " The write may or may not have happened."
            if idempotency_key is not None:
                advice += f" Send it again with idempotency_key={idempotency_key!r}."
        super().__init__(0, "No answer", f"no answer from the service ({what}).{advice}", {})
        self.may_have_written = may_have_written
        self.idempotency_key = idempotency_key


class TooMuchWorkError(CognisError):
    """413: a batch whose memories need more model time than the server's whole deadline, even
    on an idle model; `fitting_memories` of them would fit. `add_memories` splits by itself on
    it; sending the same batch again would fail the same way."""

    @property
    def fitting_memories(self) -> int | None:
        fitting = self.problem.get("fitting_memories")
        return fitting if isinstance(fitting, int) else None


class JobNotFinishedError(CognisError):
    """`wait_for_job` ran out of time: the job (`job`, its last status) is still queued or
    running on the server; wait for it again later, it is not lost."""

    def __init__(self, job: Any, timeout_s: float) -> None:
        detail = (
            f"job {job.job_id} is still {job.state} after {timeout_s:g} s; it carries on "
            "server-side: call wait_for_job again, or get_job later"
        )
        super().__init__(0, "Job not finished", detail, {})
        self.job = job


class BatchJobFailedError(CognisError):
    """A batch the server accepted as a job (202) failed: none of its memories was written.
    `job`: the job, `job.error` why; sending the batch again is a new write."""

    def __init__(self, job: Any) -> None:
        detail = f"batch job {job.job_id} failed after {job.attempts} attempt(s): {job.error}"
        super().__init__(0, "Batch job failed", detail, {})
        self.job = job


_BY_STATUS: dict[int, type[CognisError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    404: NotFoundError,
    409: ConflictError,
    412: PreconditionFailedError,
    413: TooMuchWorkError,
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
    if status in (429, 503):
        busy = RateLimitedError if status == 429 else ServiceUnavailableError
        return busy(status, title, detail, problem, retry_after_s(response))
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else CognisError)
    return cls(status, title, detail, problem)
