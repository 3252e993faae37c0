"""What every OpenSearch read is filtered by: the bound tenant (documents indexed before tenants
existed belong to the default one), the user, current versions, the scopes the caller's
session sees, and not expired. Postgres re-checks every hit; these keep the index's own top k
to what the reader may see."""

from __future__ import annotations

import uuid
from typing import Any

from app.db.tenant import DEFAULT_TENANT_ID, current_tenant


def bound_tenant() -> uuid.UUID:
    tenant_id = current_tenant()
    if tenant_id is None:  # a programming error: never search without a tenant
        raise RuntimeError("no tenant is bound to this search")
    return tenant_id


def tenant_filter(tenant_id: uuid.UUID) -> dict[str, Any]:
    """Documents of one tenant. Those indexed before tenants existed carry none and belong to
    the default tenant (a reindex gives them the field)."""
    own: dict[str, Any] = {"term": {"tenant_id": str(tenant_id)}}
    if tenant_id != DEFAULT_TENANT_ID:
        return own
    untagged = {"bool": {"must_not": {"exists": {"field": "tenant_id"}}}}
    return {"bool": {"should": [own, untagged], "minimum_should_match": 1}}


# Documents whose memory has not expired (app/memories/expiry.py `unexpired` is the rule in
# SQL; Postgres re-checks every hit). `now` is OpenSearch's clock, to the millisecond.
UNEXPIRED_DOCUMENTS: dict[str, Any] = {
    "bool": {"must_not": {"range": {"expires_at": {"lte": "now"}}}}
}


def visible_documents(user_id: str, session_id: str | None) -> list[dict[str, Any]]:
    """The filters every read applies: the bound tenant, the user, current versions, USER
    scope plus CONTEXT memories of the caller's session, not expired."""
    scope_filter: dict[str, Any] = {"term": {"scope": "USER"}}
    if session_id is not None:
        scope_filter = {
            "bool": {
                "should": [
                    {"term": {"scope": "USER"}},
                    {
                        "bool": {
                            "filter": [
                                {"term": {"scope": "CONTEXT"}},
                                {"term": {"session_id": session_id}},
                            ]
                        }
                    },
                ],
                "minimum_should_match": 1,
            }
        }
    return [
        tenant_filter(bound_tenant()),
        {"term": {"user_id": user_id}},
        {"term": {"is_current": True}},
        scope_filter,
        UNEXPIRED_DOCUMENTS,
    ]
