"""Domain errors. Each carries its HTTP status; one handler renders them as problem+json."""

from __future__ import annotations

from typing import Any


class CognisError(Exception):
    status_code = 400
    title = "Bad request"

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


class UnsupportedMediaTypeError(CognisError):
    status_code = 415
    title = "Unsupported media type"
