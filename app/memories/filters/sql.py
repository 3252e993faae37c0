"""The filter language compiled for Postgres: a SQLAlchemy condition on memories, the exact
guard every candidate is re-read under (app/memories/filters/language.py)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Text,
    and_,
    any_,
    cast,
    false,
    func,
    literal,
    not_,
    or_,
    select,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from app.db.models import Entity, Memory, MemoryEntity
from app.memories.filters.language import FIELDS, AllOf, AnyOf, Clause, Filter, Not


def to_sql(tree: Filter, table: Any = None) -> ColumnElement[bool]:
    """The filter as a condition on memories (`table`: Memory's table or an alias of it)."""
    columns = (table if table is not None else Memory.__table__).c
    return _sql(tree, columns)


def _sql(tree: Filter, columns: Any) -> ColumnElement[bool]:
    if isinstance(tree, AllOf):
        return and_(*(_sql(child, columns) for child in tree.filters))
    if isinstance(tree, AnyOf):
        return or_(*(_sql(child, columns) for child in tree.filters))
    if isinstance(tree, Not):
        return not_(_sql(tree.filter, columns))
    path = tree.metadata_path
    if path is not None:
        return _two_valued(_metadata_sql(tree, _at(columns, path)))
    spec = FIELDS[tree.field]
    if spec.kind == "entity":
        return _entity_sql(tree, columns["id"])
    condition = _column_sql(tree, columns[spec.column])
    return _two_valued(condition) if spec.nullable else condition


def _two_valued(condition: ColumnElement[bool]) -> ColumnElement[bool]:
    """True or false, never SQL NULL (a missing field): `not` must include what a clause on
    a missing field excludes, as it does in OpenSearch."""
    return func.coalesce(condition, false())


def _column_sql(clause: Clause, column: Any) -> ColumnElement[bool]:
    op, value = clause.op, clause.value
    if op == "exists":
        return column.is_not(None) if value else column.is_(None)
    if op == "eq":
        return column == value
    if op == "ne":
        return or_(column.is_(None), column != value)
    if op == "in":
        return column.in_(list(value))
    if op == "nin":
        return or_(column.is_(None), column.not_in(list(value)))
    if op == "contains":
        return func.strpos(column, literal(value)) > 0
    return _ORDER[op](column, value)


def _entity_sql(clause: Clause, memory_id: Any) -> ColumnElement[bool]:
    """The memory version names one of the clause's entities (by name, alias or id)."""
    values = clause.value if clause.op in ("in", "nin") else (clause.value,)
    names = sorted({v.lower() for v in values})
    given = literal(names, type_=_TEXT_ARRAY)
    aliases = cast(func.lower(cast(Entity.aliases, Text)), _TEXT_ARRAY)
    named = (
        select(MemoryEntity.memory_id)
        .join(Entity, Entity.id == MemoryEntity.entity_id)
        .where(
            MemoryEntity.memory_id == memory_id,
            or_(
                Entity.key == any_(given),
                aliases.op("&&")(given),
                cast(Entity.id, Text) == any_(given),
            ),
        )
        .exists()
    )
    return not_(named) if clause.op in ("ne", "nin") else named


_ORDER = {
    "gt": lambda a, b: a > b,
    "gte": lambda a, b: a >= b,
    "lt": lambda a, b: a < b,
    "lte": lambda a, b: a <= b,
}


def _at(columns: Any, path: tuple[str, ...]) -> Any:
    """`metadata #> '{a,b}'`: the jsonb value at the path, SQL NULL where there is none."""
    return columns["metadata"].op("#>")(literal(list(path), type_=_TEXT_ARRAY))


def _jsonb(value: Any) -> Any:
    return cast(literal(json.dumps(value)), JSONB)


def _metadata_sql(clause: Clause, at: Any) -> ColumnElement[bool]:
    op, value = clause.op, clause.value
    if op == "exists":
        # A JSON null counts as set: the key is there.
        return at.is_not(None) if value else at.is_(None)
    if op == "eq":
        return at == _jsonb(value)
    if op == "ne":
        return or_(at.is_(None), at != _jsonb(value))
    if op == "in":
        return or_(*(at == _jsonb(item) for item in value))
    if op == "nin":
        return or_(at.is_(None), and_(*(at != _jsonb(item) for item in value)))
    if op == "contains":
        holds = and_(func.jsonb_typeof(at) == "array", at.op("@>")(_jsonb([value])))
        if not isinstance(value, str):
            return holds
        substring = and_(
            func.jsonb_typeof(at) == "string",
            func.strpos(at.op("#>>")(literal([], type_=_TEXT_ARRAY)), literal(value)) > 0,
        )
        return or_(holds, substring)
    kind = "string" if isinstance(value, str) else "number"
    return and_(func.jsonb_typeof(at) == kind, _ORDER[op](at, _jsonb(value)))


_TEXT_ARRAY = ARRAY(Text)
