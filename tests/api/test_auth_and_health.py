"""API keys guard /v1; health endpoints stay open; OpenAPI is served."""

from __future__ import annotations

from tests.conftest import API_KEY


async def test_missing_or_wrong_key_is_401(anonymous, user_id) -> None:
    missing = await anonymous.get(f"/v1/users/{user_id}/memories")
    wrong = await anonymous.get(
        f"/v1/users/{user_id}/memories", headers={"X-API-Key": "cognis-dev-key"}
    )
    bearer_wrong = await anonymous.get(
        f"/v1/users/{user_id}/memories", headers={"Authorization": "Bearer nope"}
    )
    for response in (missing, wrong, bearer_wrong):
        assert response.status_code == 401
        assert response.headers["content-type"].startswith("application/problem+json")
        assert "X-API-Key" in response.json()["detail"]


async def test_bearer_token_is_accepted(anonymous, user_id) -> None:
    response = await anonymous.get(
        f"/v1/users/{user_id}/memories", headers={"Authorization": f"Bearer {API_KEY}"}
    )
    assert response.status_code == 200


async def test_health_ready_and_schema_are_open(anonymous) -> None:
    assert (await anonymous.get("/health")).json() == {"status": "ok"}
    ready = (await anonymous.get("/ready")).json()
    assert ready["status"] == "ready" and ready["search"] == "full"
    assert ready["postgres"] == "up"
    assert ready["opensearch"] == "up"
    assert ready["model_loaded"] is True
    assert ready["model"] == "up"
    schema = (await anonymous.get("/schema/openapi.json")).json()
    paths = schema["paths"]
    assert "/v1/users/{user_id}/memories" in paths
    assert "/v1/users/{user_id}/search" in paths
    assert "/v1/users/{user_id}/memories/{memory_id}/history" in paths
    assert "apiKey" in schema["components"]["securitySchemes"]
