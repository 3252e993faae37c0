"""Domain errors. Each carries its HTTP status; one handler renders them as problem+json."""

from __future__ import annotations

from typing import Any


class CognisError(Exception):
    status_code = 400
    title = "Bad request"
    # Seconds a client should wait before trying again (sent as Retry-After); None: no advice.
    retry_after_s: int | None = None

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra


class InvalidInputError(CognisError):
    status_code = 400
    title = "Invalid input"


class NotFoundError(CognisError):
    """Also raised for another user's memory: "not yours" and "not there" look the same."""

    status_code = 404
    title = "Not found"


class ConflictError(CognisError):
    status_code = 409
    title = "Conflict"


class PreconditionFailedError(ConflictError):
    """A write whose If-Match names a version that is no longer the memory's current one:
    another writer got there first. A conflict like any other (the ingestion worker decides
    again on one), answered 412 so a client can tell its stale precondition from the rest."""

    status_code = 412
    title = "Precondition failed"


class UserErasedError(ConflictError):
    """A write that began before its user's erase (see UserErasure): it was in flight when
    the erase ran, and is refused so the erase stays final. Sent again, it is accepted."""

    title = "User erased"


class EmbedderUnavailableError(CognisError):
    """The embedding server could not be reached (after retries). Nothing was written: texts are
    embedded before any transaction opens, so the same request can simply be sent again."""

    status_code = 503
    title = "Embedder unavailable"
    retry_after_s = 5


class DeadlineExceededError(CognisError):
    """A write that could not be done within its deadline (COGNIS_WRITE_DEADLINE_MS, or the
    client's shorter X-Cognis-Deadline-Ms): refused before anything was committed, so the same
    request can simply be sent again."""

    status_code = 503
    title = "Deadline exceeded"
    retry_after_s = 5


class EmbedderAnswerError(CognisError):
    """The embedding server answered, but not with usable embeddings (a wrong count, dimension,
    or shape, or a refusal such as 401): a configuration fault that retrying will not mend."""

    status_code = 502
    title = "Embedder gave an unusable answer"


class UnsupportedMediaTypeError(CognisError):
    status_code = 415
    title = "Unsupported media type"


class PayloadTooLargeError(CognisError):
    status_code = 413
    title = "Payload too large"


class TooMuchWorkError(PayloadTooLargeError):
    """A write whose texts alone need more model time than its whole deadline, at the model's
    current speed: refused before any model work, because sending it again would fail the same
    way. Its detail says how many fit, in the request's own unit (`fitting_memories` for a
    batch create, `fitting_texts` from the embedding server)."""

    title = "Too much work for the deadline"
