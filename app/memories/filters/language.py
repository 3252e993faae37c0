"""The filter language of search and list: one definition, checked strictly, compiled once
for Postgres (a SQLAlchemy condition) and once for OpenSearch (a `bool.filter` clause).

A filter is a JSON tree:

    {"field": "category", "op": "eq", "value": "food"}           a clause
    {"and": [filter, ...]}  {"or": [filter, ...]}  {"not": filter}

Fields are the columns in FIELDS (a new scope such as an agent or a run is one entry there)
and metadata paths, `metadata.<key>[.<key>...]`. Operators: eq, ne, in, nin, gt, gte, lt,
lte, exists, contains. A bad filter is an InvalidInputError naming the clause by its path in
the tree (`filters.and[1].op`).

Semantics (the same in both stores): `ne`/`nin` match a memory whose field is missing (null);
`exists: true` matches one whose field is set. On a text field `contains` is a substring
(case-sensitive); on a metadata path it matches an array holding the value or a string
holding it as a substring. Order operators on metadata compare numbers with numbers and
strings with strings (a value of another JSON type never matches).

OpenSearch documents hold every column field and the metadata (a `flat_object`, whose
leaves are keyword text). Column clauses compile exactly; a metadata clause is pushed into
the index only as a superset (`eq`/`in` of strings), and otherwise, like a negation of it,
matches everything there. Postgres, which re-reads every candidate under the full filter
before fusion and ranking, is the exact guard: an excluded memory is never ranked.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from app.errors import InvalidInputError
from app.memories.fields import check_instant, check_scope_id, check_text
from app.vocabulary import MAX_METADATA_DEPTH, SCOPES

Kind = Literal["text", "scope", "time", "entity"]
OPERATORS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "exists", "contains")
ORDER_OPERATORS = ("gt", "gte", "lt", "lte")
MAX_LIST = 1000  # values of one in/nin
MAX_CLAUSES = 100  # clauses of one filter
MAX_FILTER_DEPTH = 8
METADATA_PREFIX = "metadata."
_METADATA_KEY = re.compile(r"^[^.\x00]{1,128}$")


@dataclass(frozen=True, slots=True)
class FieldSpec:
    kind: Kind
    column: str  # Memory's column attribute
    document: str  # the OpenSearch document's field
    nullable: bool
    operators: tuple[str, ...]


_TEXT_OPS = ("eq", "ne", "in", "nin", "exists", "contains")
_TIME_OPS = ("eq", "ne", "gt", "gte", "lt", "lte", "exists")

# The fields a filter may name besides metadata paths (each is one column of memories and
# one field of the index's document).
FIELDS: dict[str, FieldSpec] = {
    "category": FieldSpec("text", "category", "category", False, _TEXT_OPS),
    "scope": FieldSpec("scope", "scope", "scope", False, ("eq", "ne", "in", "nin")),
    "session": FieldSpec("text", "session_id", "session_id", True, _TEXT_OPS),
    "speaker": FieldSpec("text", "speaker", "speaker", True, _TEXT_OPS),
    "agent": FieldSpec("text", "agent_id", "agent_id", True, _TEXT_OPS),
    "run": FieldSpec("text", "run_id", "run_id", True, _TEXT_OPS),
    # ISO 639-1, given or detected (0028); null: content without letters.
    "language": FieldSpec("text", "language", "language", True, _TEXT_OPS),
    "created_at": FieldSpec("time", "created_at", "created_at", False, _TIME_OPS),
    "event_time": FieldSpec("time", "event_time", "event_time", True, _TIME_OPS),
    # The validity range in transaction time: from created_at until superseded_at (null
    # while current), as the analysts' `memory_versions.valid_from` / `valid_to`.
    "valid_from": FieldSpec("time", "created_at", "created_at", False, _TIME_OPS),
    "valid_to": FieldSpec("time", "superseded_at", "superseded_at", True, _TIME_OPS),
    # A named thing the memory names (0039, docs/entities.md): an entity's name or alias, any
    # case, or its id. Postgres only (memory_entities): the index matches everything there.
    "entity": FieldSpec("entity", "id", "", False, ("eq", "ne", "in", "nin")),
}


@dataclass(frozen=True, slots=True)
class Clause:
    field: str  # a FIELDS name or a metadata path
    op: str
    value: Any  # checked for the field and operator (datetime for time fields)

    @property
    def metadata_path(self) -> tuple[str, ...] | None:
        if self.field.startswith(METADATA_PREFIX):
            return tuple(self.field[len(METADATA_PREFIX) :].split("."))
        return None


@dataclass(frozen=True, slots=True)
class AllOf:
    filters: tuple[Filter, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    filters: tuple[Filter, ...]


@dataclass(frozen=True, slots=True)
class Not:
    filter: Filter


Filter = Clause | AllOf | AnyOf | Not

# The JSON Schema of a filter, for the OpenAPI document (the parser below is the authority).
FILTER_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        'A filter: a clause {"field", "op", "value"} or {"and": [...]}, {"or": [...]}, '
        '{"not": {...}}. Fields: '
        + ", ".join(FIELDS)
        + ', and metadata paths ("metadata.project", "metadata.a.b"). Operators: '
        + ", ".join(OPERATORS)
        + ". in/nin take a list; exists takes true or false; times are RFC 3339. At most "
        + f"{MAX_FILTER_DEPTH} levels of and/or/not and {MAX_CLAUSES} clauses. See README, "
        + '"Filters".'
    ),
    "examples": [
        {
            "and": [
                {"field": "category", "op": "in", "value": ["food", "health"]},
                {"field": "metadata.project", "op": "eq", "value": "apollo"},
                {"not": {"field": "created_at", "op": "lt", "value": "2026-01-01T00:00:00Z"}},
            ]
        }
    ],
}


def _bad(path: str, message: str) -> InvalidInputError:
    return InvalidInputError(f"{path}: {message}", field=path)


def parse_filter(raw: Any, path: str = "filters") -> Filter:
    """The filter tree of a request's JSON, or an InvalidInputError naming the bad clause."""
    counter = [0]
    return _parse(raw, path, 0, counter)


def parse_filter_json(text: str, path: str = "filters") -> Filter:
    """A filter sent as JSON text (a query parameter of the list)."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise _bad(path, f"not valid JSON ({exc})") from None
    except RecursionError:
        # Nested far past the limit: too deep for the JSON reader itself to walk.
        raise _too_deep(path) from None
    return parse_filter(raw, path)


def _too_deep(path: str) -> InvalidInputError:
    """The one nesting bound, wherever a filter is read (a search body, a list's or an
    export's query parameter, the CLI)."""
    return _bad(path, f"filters nest at most {MAX_FILTER_DEPTH} levels of and, or and not")


def _parse(raw: Any, path: str, depth: int, counter: list[int]) -> Filter:
    if depth > MAX_FILTER_DEPTH:
        raise _too_deep(path)
    if not isinstance(raw, dict):
        raise _bad(
            path,
            'a filter is an object: {"field", "op", "value"}, {"and": [...]}, {"or": [...]} '
            'or {"not": {...}}',
        )
    combinators = [key for key in ("and", "or", "not") if key in raw]
    if combinators:
        (key, *others) = combinators
        if others or len(raw) != 1:
            raise _bad(path, f'"{key}" must be the only key of its object, not {sorted(raw)}')
        if key == "not":
            return Not(_parse(raw["not"], f"{path}.not", depth + 1, counter))
        items = raw[key]
        if not isinstance(items, list) or not items:
            raise _bad(f"{path}.{key}", f'"{key}" takes a non-empty list of filters')
        children = tuple(
            _parse(item, f"{path}.{key}[{i}]", depth + 1, counter) for i, item in enumerate(items)
        )
        return AllOf(children) if key == "and" else AnyOf(children)
    unknown = sorted(set(raw) - {"field", "op", "value"})
    if unknown:
        raise _bad(
            path,
            f"unknown key(s) {unknown}: a clause has field, op and value; a combinator is "
            "and, or or not",
        )
    counter[0] += 1
    if counter[0] > MAX_CLAUSES:
        raise _bad(path, f"a filter has at most {MAX_CLAUSES} clauses")
    return _clause(raw, path)


def _clause(raw: dict[str, Any], path: str) -> Clause:
    field = raw.get("field")
    if not isinstance(field, str):
        raise _bad(f"{path}.field", "field must be a string")
    check_text(field, f"{path}.field")  # a metadata path's keys are compared in Postgres
    metadata = field.startswith(METADATA_PREFIX)
    spec = FIELDS.get(field)
    if metadata:
        keys = field[len(METADATA_PREFIX) :].split(".")
        if len(keys) > MAX_METADATA_DEPTH or not all(_METADATA_KEY.match(k) for k in keys):
            raise _bad(
                f"{path}.field",
                f"a metadata path is metadata.<key>[.<key>...] with at most "
                f"{MAX_METADATA_DEPTH} non-empty keys of up to 128 characters",
            )
    elif spec is None:
        raise _bad(
            f"{path}.field",
            f"unknown field {field!r}: use one of {', '.join(FIELDS)} or metadata.<key>",
        )
    op = raw.get("op")
    if op not in OPERATORS:
        raise _bad(f"{path}.op", f"unknown operator {op!r}: use one of {', '.join(OPERATORS)}")
    if "value" not in raw:
        raise _bad(f"{path}.value", f"operator {op} needs a value")
    value = raw["value"]
    if spec is None:
        return Clause(field, op, _metadata_value(op, value, f"{path}.value"))
    if op not in spec.operators:
        raise _bad(
            f"{path}.op",
            f"operator {op} does not apply to {field}: use one of {', '.join(spec.operators)}",
        )
    if op == "exists":
        return Clause(field, op, _boolean(value, f"{path}.value"))
    if op in ("in", "nin"):
        items = _list(value, f"{path}.value")
        return Clause(
            field,
            op,
            tuple(_scalar(spec, item, f"{path}.value[{i}]") for i, item in enumerate(items)),
        )
    return Clause(field, op, _scalar(spec, value, f"{path}.value"))


def _boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise _bad(path, "exists takes true or false")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list) or not value or len(value) > MAX_LIST:
        raise _bad(path, f"in and nin take a list of 1 to {MAX_LIST} values")
    return value


def _scalar(spec: FieldSpec, value: Any, path: str) -> Any:
    if spec.kind == "time":
        if not isinstance(value, str):
            raise _bad(path, "a time is an RFC 3339 string, e.g. 2026-05-01T00:00:00Z")
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise _bad(
                path, f"{value!r} is not an RFC 3339 time, e.g. 2026-05-01T00:00:00Z"
            ) from None
        return check_instant(moment, path)
    if not isinstance(value, str) or not value:
        raise _bad(path, "the value must be a non-empty string")
    check_text(value, path)
    if spec.kind == "scope" and value not in SCOPES:
        raise _bad(path, f"scope is one of {', '.join(SCOPES)}, not {value!r}")
    return value


def _metadata_value(op: str, value: Any, path: str) -> Any:
    if op == "exists":
        return _boolean(value, path)
    if op in ("in", "nin"):
        items = _list(value, path)
        for i, item in enumerate(items):
            _json_scalar(item, f"{path}[{i}]")
        return tuple(items)
    _json_scalar(value, path)
    if op in ORDER_OPERATORS and (isinstance(value, bool) or value is None):
        raise _bad(path, f"{op} compares numbers or strings, not {json.dumps(value)}")
    return value


def _json_scalar(value: Any, path: str) -> None:
    if not (value is None or isinstance(value, str | bool | int | float)):
        raise _bad(path, "a metadata value is a string, number, boolean or null")
    if isinstance(value, str):
        check_text(value, path)


def visible_to(agent_id: str | None, run_id: str | None) -> Filter | None:
    """What a search or list naming an agent and/or a run sees, as a filter: that agent's
    memories and the user's shared ones (no agent), and likewise that run's memories and
    those of no run. Naming neither: None, every memory of the user (as mem0 does)."""
    parts = [
        AnyOf((Clause(field, "eq", value), Clause(field, "exists", False)))
        for field, value in (("agent", agent_id), ("run", run_id))
        if value is not None
    ]
    return AllOf(tuple(parts)) if parts else None


def listing_filter(
    filters_json: str | None,
    agent_id: str | None,
    run_id: str | None,
    names: tuple[str, str, str] = ("filters", "agent_id", "run_id"),
) -> Filter | None:
    """What a list or an export keeps: its `filters` (JSON text) within what its agent and
    run see, checked; `names` are the parameters' names, for the errors."""
    return all_of(
        parse_filter_json(filters_json, names[0]) if filters_json is not None else None,
        visible_to(check_scope_id(agent_id, names[1]), check_scope_id(run_id, names[2])),
    )


def owned_by(agent_id: str | None, run_id: str | None) -> Filter | None:
    """The memories of exactly that agent and/or run, as a filter: unlike `visible_to`, not
    the user's shared ones (no agent, or no run). What a delete of an agent's or a run's
    memories acts on, as a scoped erase does. Naming neither: None."""
    parts = tuple(
        Clause(field, "eq", value)
        for field, value in (("agent", agent_id), ("run", run_id))
        if value is not None
    )
    return all_of(*parts)


def deletion_filter(
    filters_json: str | None, agent_id: str | None, run_id: str | None
) -> Filter | None:
    """What a delete of many memories ends: its `filters` (JSON text) and exactly its agent's
    and/or run's memories, checked."""
    return all_of(
        parse_filter_json(filters_json) if filters_json is not None else None,
        owned_by(check_scope_id(agent_id, "agent_id"), check_scope_id(run_id, "run_id")),
    )


def all_of(*trees: Filter | None) -> Filter | None:
    """The trees given (None: no condition) that must all hold, as one filter."""
    kept = tuple(tree for tree in trees if tree is not None)
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else AllOf(kept)


def clauses(tree: Filter) -> list[Clause]:
    """Every clause of the tree, in order."""
    if isinstance(tree, Clause):
        return [tree]
    if isinstance(tree, Not):
        return clauses(tree.filter)
    return [c for child in tree.filters for c in clauses(child)]
