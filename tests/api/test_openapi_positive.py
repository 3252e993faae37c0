"""The OpenAPI document says what the validation accepts (issue 54, item 6): schemathesis
generates requests that are valid by the document (its positive data) and every one is
taken: no 5xx, and no 4xx that refuses the request's shape (400, 422). A 404 (the generated
id names nothing), 409, 401/403 and 429 are answers about the state, not the shape, and
pass (schemathesis's own list).

The operations checked are those whose document was made to match their validation: mem0's
routes, whose bodies the routes read loosely (app/api/mem0/openapi.py), and the memory
writes' deadline header. Bounded like tests/api/test_contract.py: a fixed number of examples
per operation, a fixed seed, a timeout per request."""

from __future__ import annotations

import hypothesis
import pytest
import schemathesis
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.conftest import API_KEY, ApiProcess

pytestmark = pytest.mark.slow

EXAMPLES_PER_OPERATION = 10
SEED = 20261208
REQUEST_TIMEOUT_S = 120  # past COGNIS_INGEST_WAIT_TIMEOUT_S (60 s): an add then answers 202
OPERATIONS = {
    "POST /v3/memories/add",
    "POST /v3/memories",
    "POST /v3/memories/search",
    "PUT /v1/batch",
    "DELETE /v1/batch",
    "GET /v1/memories/{memory_id}",
    "PUT /v1/memories/{memory_id}",
    "DELETE /v1/memories/{memory_id}",
    "GET /v1/memories/{memory_id}/history",
}
SETTINGS = hypothesis.settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(hypothesis.HealthCheck),
    phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
)


def test_every_request_the_document_allows_is_taken(api: ApiProcess) -> None:
    schema = schemathesis.openapi.from_url(f"{api.url}/schema/openapi.json")
    failures: list[str] = []
    checked: set[str] = set()
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.label not in OPERATIONS:
            continue
        checked.add(operation.label)

        @SETTINGS
        @hypothesis.seed(SEED)
        @hypothesis.given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate(
                base_url=api.url,
                headers={"X-API-Key": API_KEY},
                checks=[not_a_server_error, positive_data_acceptance],
                timeout=REQUEST_TIMEOUT_S,
            )

        try:
            check()
        except Exception as exc:  # every operation's failure, not only the first
            failures.append(f"{operation.label}: {exc}")
    assert checked == OPERATIONS, OPERATIONS - checked
    assert not failures, "\n\n".join(failures)
