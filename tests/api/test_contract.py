"""The OpenAPI document is a contract the running API keeps: schemathesis generates requests
from it (valid and invalid ones) against the real API and checks every answer: no 5xx, only
documented statuses and content types, bodies that match their documented schemas.

Bounded: a fixed number of examples per operation and mode, a fixed seed, a timeout per
request and a time budget for the whole run (operations past it are reported, not run)."""

from __future__ import annotations

import json
import time

import hypothesis
import schemathesis
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import API_KEY, ApiProcess

EXAMPLES_PER_OPERATION = 20  # per generation mode
SEED = 20261201
REQUEST_TIMEOUT_S = 30
BUDGET_S = 240
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
SETTINGS = hypothesis.settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(hypothesis.HealthCheck),
    phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
)


@schemathesis.serializer("application/x-ndjson")
def _one_ndjson_line(_ctx: schemathesis.SerializationContext, value: object) -> bytes:
    return json.dumps(value).encode() + b"\n"


def test_the_api_keeps_its_openapi_contract(api: ApiProcess) -> None:
    schema = schemathesis.openapi.from_url(f"{api.url}/schema/openapi.json")
    failures: list[str] = []
    skipped: list[str] = []
    ran = 0
    deadline = time.monotonic() + BUDGET_S
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            if time.monotonic() > deadline:
                skipped.append(f"{operation.label} ({mode})")
                continue

            @SETTINGS
            @hypothesis.seed(SEED)
            @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
            def check(case: schemathesis.Case) -> None:
                case.call_and_validate(
                    base_url=api.url,
                    headers={"X-API-Key": API_KEY},
                    checks=CHECKS,
                    timeout=REQUEST_TIMEOUT_S,
                )

            try:
                check()
                ran += 1
            except hypothesis.errors.Unsatisfiable:
                # No invalid request exists (no parameters, no body): nothing to send.
                assert mode is GenerationMode.NEGATIVE, operation.label
            except Exception as exc:  # every operation's failure, not only the first
                failures.append(f"{operation.label} ({mode}): {exc}")
    assert not failures, "\n\n".join(failures)
    assert not skipped, f"time budget of {BUDGET_S}s spent before: {skipped}"
    assert ran >= 2 * 14 - 3, ran  # every operation in both modes, less the 3 without input
