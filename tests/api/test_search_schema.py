"""The search request as the OpenAPI document publishes it agrees with app/retrieval/profiles.py:
each profile's documented levers are the ones PROFILES switches on, and every lever can be
switched by a request."""

from __future__ import annotations

import re

import httpx

from app.memories.filters import FIELDS, OPERATORS
from app.retrieval.profiles import PROFILES, Levers

LEVERS = Levers.__struct_fields__


async def _search_body_schema(anonymous: httpx.AsyncClient) -> dict:
    document = (await anonymous.get("/schema/openapi.json")).json()
    schemas = document["components"]["schemas"]
    body = next(schema for name, schema in schemas.items() if name.endswith("SearchBody"))
    return body


async def test_the_documented_profiles_name_the_levers_they_switch_on(
    anonymous: httpx.AsyncClient,
) -> None:
    profile = (await _search_body_schema(anonymous))["properties"]["profile"]
    described = dict(re.findall(r'"(\w+)": ([^;]*?)(?:;|\. Null)', profile["description"]))
    documented = {
        name: {lever for lever in LEVERS if re.search(rf"\b{lever}\b", text)}
        for name, text in described.items()
    }
    switched_on = {
        name: {lever for lever in LEVERS if getattr(levers, lever)}
        for name, levers in PROFILES.items()
    }
    assert documented == switched_on
    assert set(_enum_values(profile)) - {None} == set(PROFILES)


def _enum_values(schema: object) -> list[object]:
    """The enum values anywhere in a schema (Literal | None nests them under oneOf/anyOf)."""
    if isinstance(schema, dict):
        found = list(schema.get("enum", []))
        return found + [value for child in schema.values() for value in _enum_values(child)]
    if isinstance(schema, list):
        return [value for child in schema for value in _enum_values(child)]
    return []


async def test_a_request_can_switch_every_lever(anonymous: httpx.AsyncClient) -> None:
    document = (await anonymous.get("/schema/openapi.json")).json()
    body = await _search_body_schema(anonymous)
    reference = body["properties"]["levers"]["$ref"].rsplit("/", 1)[-1]
    overrides = document["components"]["schemas"][reference]["properties"]
    assert set(overrides) == set(LEVERS)


async def test_the_filter_language_is_documented_as_defined(anonymous: httpx.AsyncClient) -> None:
    """The body's `filters` names every field and operator of app/memories/filters/."""
    filters = (await _search_body_schema(anonymous))["properties"]["filters"]
    described = filters["description"]
    named = re.search(r"Fields: (.*?), and metadata paths", described)
    assert named is not None, described
    assert named.group(1).split(", ") == list(FIELDS)
    operators = re.search(r"Operators: (.*?)\. ", described)
    assert operators is not None and operators.group(1).split(", ") == list(OPERATORS)
    assert filters["examples"]
