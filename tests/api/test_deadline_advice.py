"""The scheduler's refusals as an HTTP client reads them: the scheduler says what happened and
what fits (app/ml/scheduling/work.py); the API adds what the client does about it
(app/api/deadlines.py), after the detail, with the headers that advice names."""

from __future__ import annotations

from litestar import get
from litestar.testing import create_test_client

from app.api.deadlines import DEADLINE_HANDLERS
from app.api.problems import EXCEPTION_HANDLERS, PROBLEM_JSON
from app.ml.scheduling.work import Deadline


@get("/late", sync_to_thread=False)
def late() -> None:
    raise Deadline(at=0.0, budget_ms=250).refusal()


@get("/too-much", sync_to_thread=False)
def too_much() -> None:
    raise Deadline.after_ms(4_000).too_much(10.0, 20, "memories")


def test_a_refusal_tells_the_client_what_to_do_and_the_scheduler_does_not() -> None:
    with create_test_client(
        [late, too_much], exception_handlers={**EXCEPTION_HANDLERS, **DEADLINE_HANDLERS}
    ) as client:
        passed = client.get("/late")
        refused = client.get("/too-much")

    assert passed.status_code == 503 and passed.headers["content-type"] == PROBLEM_JSON
    assert passed.headers["retry-after"] == "5"
    detail = passed.json()["detail"]
    assert detail.startswith(Deadline(at=0.0, budget_ms=250).refusal().detail)
    assert detail.endswith("nothing was written: send it again after Retry-After seconds")

    assert refused.status_code == 413
    body = refused.json()
    assert body["fitting_memories"] == 8 and body["needed_ms"] == 10_000
    assert "Send at most 8 memories per request (a client's X-Cognis-Deadline-Ms" in body["detail"]
    assert body["detail"].endswith("or use POST /v1/users/{user_id}/import, which has none")
    # The scheduler's own words name no header and no endpoint.
    bare = Deadline.after_ms(4_000).too_much(10.0, 20, "memories").detail
    assert "X-Cognis" not in bare and "/v1/" not in bare and bare in body["detail"]
