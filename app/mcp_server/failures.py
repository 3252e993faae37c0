"""A failed API call as the text of a tool error: what went wrong and what the agent can do
next (an agent reads it, not a stack trace; an empty text leaves it guessing)."""

from __future__ import annotations

import math

import httpx
from cognis_client import CognisError, InvalidRequestError, NoAnswerError, RateLimitedError


def _retry_hint(key: str | None) -> str:
    if key is None:
        return ""
    return f" To retry safely (never writing twice), call again with idempotency_key={key!r}."


def no_answer_text(error: BaseException, key: str | None) -> str:
    """A timeout or lost connection. A write may have happened: say how to find out, and how
    to retry without writing twice."""
    why = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    if key is None:
        return (
            f"no answer from the memory service ({why}); nothing was changed by this call. "
            "Call again in a few seconds."
        )
    return (
        f"no answer from the memory service ({why}): the write may or may not have happened. "
        "Check with search_memories or list_memories whether it is there, or call again with "
        f"idempotency_key={key!r}: the service then does it at most once."
    )


def failure_text(error: Exception, key: str | None) -> str:
    """The tool error's text for an API call that failed with `error`; `key` is the write's
    idempotency key (None for a read)."""
    if isinstance(error, NoAnswerError):  # the client's own retries ran out
        return no_answer_text(error.__cause__ or error, key)
    if isinstance(error, httpx.TransportError):
        return no_answer_text(error, key)
    if isinstance(error, RateLimitedError):
        wait_s = math.ceil(error.retry_after_s or 1)
        done = "" if key is None else " Nothing was written."
        return (
            f"{error} This API key is over its rate limit:{done} wait {wait_s} s, then call "
            f"again.{_retry_hint(key)}"
        )
    if isinstance(error, InvalidRequestError):
        field = error.problem.get("field")
        fix = f" Fix the argument {field!r}" if field else " Fix the arguments"
        return f"{error}{fix} and call again (nothing was written)."
    if isinstance(error, CognisError):
        # The API's own explanation, e.g. "404 Not found: memory ... does not exist".
        return str(error) + _retry_hint(key)
    raise error
