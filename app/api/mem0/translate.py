"""mem0's words in this service's: its filters as a filter tree (app/memories/filters/), a
memory version as mem0's memory object, a chain of versions as mem0's history events.

mem0 scopes a memory by `user_id`, `agent_id` and `run_id`; here a memory belongs to one user
(the path of the native API) and carries `agent_id` and `run_id` as fields. So a mem0 filter
names exactly one user, at its top (alone or in its top-level AND), and everything else in it
becomes a filter over that user's memories."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from typing import Any

from app.api.schemas.memories import MemoryOut
from app.db.models import Memory
from app.errors import InvalidInputError

# mem0's filter fields that are columns here (the filter language's names).
_COLUMNS = {
    "agent_id": "agent",
    "run_id": "run",
    "categories": "category",
    "created_at": "created_at",
    # A version is created by the update that made it: the memory's last update.
    "updated_at": "created_at",
}
# mem0's operators with the same meaning here. icontains is case-sensitive here.
_OPERATORS = {
    "eq": "eq",
    "ne": "ne",
    "in": "in",
    "nin": "nin",
    "gt": "gt",
    "gte": "gte",
    "lt": "lt",
    "lte": "lte",
    "contains": "contains",
    "icontains": "contains",
}
_LOGICAL = {"AND": "and", "OR": "or"}
_UNSUPPORTED = {
    "app_id": "apps do not exist here (a tenant's key is its project)",
    "keywords": "search with a query instead",
    "memory_ids": "read memories by id with get(memory_id)",
}


def _bad(message: str, field: str = "filters") -> InvalidInputError:
    return InvalidInputError(message, field=field)


def split_filters(raw: Any, user_id: str | None = None) -> tuple[str, dict[str, Any] | None]:
    """The one user a mem0 filter names (or `user_id`, given beside it), and the rest of it
    as a filter tree of the native language (None: no condition)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise _bad("filters must be an object such as {'AND': [{'user_id': 'alice'}]}")
    users: set[str] = {user_id} if user_id is not None else set()
    conditions: list[dict[str, Any]] = []
    top = raw["AND"] if set(raw) == {"AND"} else [raw]
    if not isinstance(top, list):
        raise _bad("filters.AND must be a list of conditions")
    for item in top:
        if not isinstance(item, dict):
            raise _bad("every condition of filters.AND must be an object")
        rest = dict(item)
        if "user_id" in rest:
            named = rest.pop("user_id")
            if not isinstance(named, str) or not named or named == "*":
                raise _bad(
                    "filters.user_id must name one user: a search or listing reads one "
                    "user's memories",
                    "filters.user_id",
                )
            users.add(named)
        if rest:
            conditions.append(_tree(rest, "filters"))
    if len(users) != 1:
        raise _bad(
            "name exactly one user: filters={'user_id': '<user>'} (or in its top-level AND); "
            f"got {len(users)}",
            "filters.user_id",
        )
    (user,) = users
    if not conditions:
        return user, None
    return user, conditions[0] if len(conditions) == 1 else {"and": conditions}


def _tree(raw: dict[str, Any], path: str) -> dict[str, Any]:
    """One mem0 condition object (several keys: all of them) as a native filter tree."""
    parts: list[dict[str, Any]] = []
    for key, value in raw.items():
        where = f"{path}.{key}"
        if key in _LOGICAL:
            if not isinstance(value, list) or not value:
                raise _bad(f"{where} must be a non-empty list of conditions", where)
            parts.append({_LOGICAL[key]: [_object(v, where) for v in value]})
        elif key == "NOT":
            items = value if isinstance(value, list) else [value]
            parts.append({"not": {"or": [_object(v, where) for v in items]}})
        elif key == "user_id":
            raise _bad(
                "user_id is allowed only at the top of the filter or in its top-level AND "
                "(a search reads one user's memories)",
                where,
            )
        elif key in _UNSUPPORTED:
            raise _bad(f"the filter field {key} is not supported: {_UNSUPPORTED[key]}", where)
        elif key == "metadata":
            if not isinstance(value, dict) or not value:
                raise _bad(f"{where} must be an object of metadata keys and values", where)
            parts.extend(_clauses(f"metadata.{k}", v, f"{where}.{k}") for k, v in value.items())
        elif key in _COLUMNS:
            parts.append(_clauses(_COLUMNS[key], value, where))
        else:
            raise _bad(
                f"unknown filter field {key!r}: use user_id, agent_id, run_id, categories, "
                "created_at, updated_at, metadata, AND, OR or NOT",
                where,
            )
    return parts[0] if len(parts) == 1 else {"and": parts}


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not value:
        raise _bad(f"every condition of {path} must be a non-empty object", path)
    return _tree(value, path)


def _clauses(field: str, value: Any, path: str) -> dict[str, Any]:
    """`{"field": value}`, `{"field": "*"}` (set) or `{"field": {"op": value, ...}}`."""
    if value == "*":
        return {"field": field, "op": "exists", "value": True}
    if not isinstance(value, dict):
        return {"field": field, "op": "eq", "value": value}
    clauses = []
    for op, operand in value.items():
        if op not in _OPERATORS:
            raise _bad(f"unknown operator {op!r}: use one of {', '.join(_OPERATORS)}", path)
        clauses.append({"field": field, "op": _OPERATORS[op], "value": operand})
    if not clauses:
        raise _bad(f"{path} names no operator", path)
    return clauses[0] if len(clauses) == 1 else {"and": clauses}


def memory_out(memory: MemoryOut, score: float | None = None) -> dict[str, Any]:
    """A version (as the native API shows it) as mem0's memory object; its `id` is the
    memory's, stable over updates."""
    out: dict[str, Any] = {
        "id": str(memory.chain_id),
        "memory": memory.content,
        "user_id": memory.user_id,
        "agent_id": memory.agent_id,
        "run_id": memory.run_id,
        "app_id": None,
        "metadata": memory.metadata or None,
        "categories": [memory.category],
        "created_at": memory.created_at.isoformat(),
        "updated_at": memory.created_at.isoformat(),
        "expiration_date": memory.expires_at.date().isoformat() if memory.expires_at else None,
        "immutable": False,
    }
    if score is not None:
        out["score"] = score
    return out


def history_out(versions: list[Memory]) -> list[dict[str, Any]]:
    """A chain of versions, oldest first, as mem0's history: ADD, an UPDATE per later
    version, and DELETE when the chain has ended (its last version superseded by none)."""
    events = []
    previous: Memory | None = None
    for version in versions:
        events.append(_event(version, previous, "ADD" if previous is None else "UPDATE"))
        previous = version
    last = versions[-1]
    if not last.is_current and last.superseded_at is not None:
        deleted = _event(last, last, "DELETE")
        deleted.update(new_memory=None, created_at=last.superseded_at.isoformat())
        deleted["updated_at"] = deleted["created_at"]
        events.append(deleted)
    return events


def _event(version: Memory, previous: Memory | None, event: str) -> dict[str, Any]:
    return {
        "id": str(version.id),
        "memory_id": str(version.chain_id),
        "input": [],
        "old_memory": previous.content if previous is not None else None,
        "new_memory": version.content,
        "user_id": version.user_id,
        "categories": [version.category],
        "event": event,
        "metadata": version.metadata_ or None,
        "created_at": version.created_at.isoformat(),
        "updated_at": version.created_at.isoformat(),
    }


def expiration(raw: Any) -> datetime | None:
    """mem0's expiration_date (YYYY-MM-DD, or an ISO instant): the end of that day, UTC."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise _bad("expiration_date must be a date such as 2027-01-31", "expiration_date")
    try:
        if len(raw) == 10:
            return datetime.combine(date.fromisoformat(raw), time.max, tzinfo=UTC)
        instant = datetime.fromisoformat(raw)
    except ValueError as exc:
        raise _bad(
            f"expiration_date {raw[:40]!r} is not a date such as 2027-01-31", "expiration_date"
        ) from exc
    return instant if instant.tzinfo else instant.replace(tzinfo=UTC)
