"""Write deadlines: a write that cannot be done in time is refused, never committed after its
client has stopped waiting.

A write's deadline runs from its arrival: COGNIS_WRITE_DEADLINE_MS for an interactive write,
COGNIS_BULK_WRITE_DEADLINE_MS for a batch, or the client's X-Cognis-Deadline-Ms when that is
shorter. Its texts wait in the embedding queue (app/ml/scheduling/) at most that long; a write
whose deadline passes before it commits is answered 503 + Retry-After (problem+json), and
nothing of it is written.

The scheduler's refusals say what happened and what would fit (app/ml/scheduling/work.py);
what an HTTP client does about them (Retry-After, this header, the import endpoint) is worded
here, where HTTP is spoken, and follows their detail in the problem+json answer.
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response
from litestar.openapi.spec import OpenAPIType
from litestar.params import Parameter

from app.api.contract import UserId
from app.api.problems import on_domain_error
from app.db.tenant import current_tenant
from app.errors import CognisError, DeadlineExceededError, InvalidInputError, TooMuchWorkError
from app.ml.scheduling.work import Deadline, Work, WorkClass
from app.runtime import Runtime

DEADLINE_HEADER = "X-Cognis-Deadline-Ms"
MAX_DEADLINE_MS = 3_600_000
# 1 to MAX_DEADLINE_MS as digits: what the OpenAPI document says the header takes.
DEADLINE_PATTERN = r"^(?:[1-9][0-9]{0,5}|[1-2][0-9]{6}|3[0-5][0-9]{5}|3600000)$"
# The header's schema: a string of those digits (an absent header is no deadline; `null` is
# no value a header can carry, so the document does not offer it).
DEADLINE_SCHEMA = {"oneOf": None, "type": OpenAPIType.STRING, "pattern": DEADLINE_PATTERN}

RequestedDeadline = Annotated[
    str | None,
    Parameter(
        header=DEADLINE_HEADER,
        schema_extra=DEADLINE_SCHEMA,
        description=f"Milliseconds this client will wait (1-{MAX_DEADLINE_MS}). A write that "
        "cannot be done within them (nor within the server's own deadline) is refused with "
        "503 and Retry-After, and nothing of it is written.",
    ),
]


def requested_ms(header: str | None) -> int | None:
    """The client's deadline in ms; InvalidInputError naming the header when it is not one."""
    if header is None:
        return None
    value = header.strip()
    if not value.isdigit() or not 1 <= int(value) <= MAX_DEADLINE_MS:
        raise InvalidInputError(
            f"{DEADLINE_HEADER} must be a whole number of milliseconds from 1 to "
            f"{MAX_DEADLINE_MS}, not {header[:32]!r}",
            field=DEADLINE_HEADER,
        )
    return int(value)


def write_work(work_class: WorkClass, user_id: str, configured_ms: int, header: str | None) -> Work:
    """The model work of a write of `user_id` in the request's tenant, with the shorter of
    the server's deadline and the client's (0 or no header: none of that side)."""
    budgets = [ms for ms in (configured_ms, requested_ms(header)) if ms]
    deadline = Deadline.after_ms(min(budgets)) if budgets else None
    return Work(work_class, current_tenant(), user_id, deadline)


async def provide_interactive_work(
    user_id: UserId, runtime: Runtime, deadline_ms: RequestedDeadline = None
) -> Work:
    """One memory, a PATCH, a message: served before bulk work."""
    return write_work(
        WorkClass.INTERACTIVE, user_id, runtime.settings.api.write_deadline_ms, deadline_ms
    )


async def provide_bulk_work(
    user_id: UserId, runtime: Runtime, deadline_ms: RequestedDeadline = None
) -> Work:
    """A batch create: behind queries and interactive writes."""
    return write_work(
        WorkClass.BULK, user_id, runtime.settings.api.bulk_write_deadline_ms, deadline_ms
    )


# What a client does about each refusal of the scheduler, after its detail.
CLIENT_ADVICE: dict[type[CognisError], str] = {
    DeadlineExceededError: ": send it again after Retry-After seconds",
    TooMuchWorkError: f" (a client's {DEADLINE_HEADER} can only shorten the server's own "
    "deadline), or use POST /v1/users/{user_id}/import, which has none",
}


def on_scheduling_refusal(request: Request, exc: CognisError) -> Response[dict[str, Any]]:
    """A deadline passed, or too much work for the whole deadline: problem+json with the
    client's advice."""
    advice = next(text for kind, text in CLIENT_ADVICE.items() if isinstance(exc, kind))
    return on_domain_error(request, exc, advice)


# Beside app/api/problems.py's EXCEPTION_HANDLERS (app/asgi.py composes both).
DEADLINE_HANDLERS: dict[Any, Any] = dict.fromkeys(CLIENT_ADVICE, on_scheduling_refusal)
