"""What an idempotency key may be, what makes two requests "the same", and the errors."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

import msgspec

from app.errors import CognisError, ConflictError, InvalidInputError
from app.vocabulary import MAX_IDEMPOTENCY_KEY_CHARS

IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
_KEY = re.compile(rf"[\x21-\x7e]{{1,{MAX_IDEMPOTENCY_KEY_CHARS}}}")


def check_key(key: str) -> str:
    """The key as given, or a 400 that says what a key must be."""
    if not _KEY.fullmatch(key):
        raise InvalidInputError(
            f"{IDEMPOTENCY_KEY_HEADER} must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} visible ASCII "
            f"characters without spaces (a random UUID is a good key); got {len(key)} "
            "characters",
            field=IDEMPOTENCY_KEY_HEADER,
        )
    return key


def request_hash(method: str, path: str, query: Iterable[tuple[str, str]], body: bytes) -> bytes:
    """SHA-256 of what makes a request: method, path, query and body. A JSON body counts by
    its content (key order and spacing aside), so a client that re-encodes it on retry still
    sends "the same" request."""
    try:
        canonical = msgspec.json.encode(msgspec.json.decode(body), order="sorted") if body else b""
    except (msgspec.DecodeError, RecursionError):
        canonical = body  # not JSON (the handler refuses it): the bytes themselves
    digest = hashlib.sha256(f"{method} {path}\n".encode())
    for name, value in sorted(query):
        digest.update(f"{name}={value}\n".encode())
    digest.update(b"\n")
    digest.update(canonical)
    return digest.digest()


class IdempotencyKeyReusedError(CognisError):
    """The key was first used for another request: replaying that answer would be wrong, and
    doing this one would make the key mean two writes."""

    status_code = 422
    title = "Idempotency key reused"

    def __init__(self, key: str, route: str) -> None:
        super().__init__(
            f"{IDEMPOTENCY_KEY_HEADER} {key!r} was already used for a different request "
            f"({route}, with another path, query or body); send a new key for a new request, "
            "and the same key only to retry the very same request",
            field=IDEMPOTENCY_KEY_HEADER,
            code="idempotency_key_reused",
        )


class IdempotencyKeyInUseError(ConflictError):
    """The first request with this key is still running: its answer is not known yet."""

    title = "Idempotency key in use"

    def __init__(self, key: str, retry_after_s: int) -> None:
        super().__init__(
            f"a request with {IDEMPOTENCY_KEY_HEADER} {key!r} is still running; nothing was "
            f"done twice. Retry with the same key after {retry_after_s} s to get its response",
            field=IDEMPOTENCY_KEY_HEADER,
            code="idempotency_key_in_use",
        )
        self.retry_after_s = retry_after_s
