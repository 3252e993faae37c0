"""`python -m app admin ...`: tenants and their API keys, from the command line.

Talks to Postgres directly, so it works before any admin key exists: as the worker role
(COGNIS_WORKER_DATABASE_URL, else COGNIS_DATABASE_URL, whose role must then be in
cognis_background), since row-level security shows every tenant's rows only to it (0042).
Prints JSON; a new key's secret is printed once and stored nowhere."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import msgspec

from app.config import get_settings
from app.db.engine import create_engine, create_sessionmaker, worker_url
from app.errors import CognisError
from app.tenants.schemas import IssuedKeyOut, KeyOut, TenantOut
from app.tenants.service import TenantAdmin


async def _in_transaction(action: Callable[[TenantAdmin], Awaitable[Any]]) -> Any:
    store = get_settings().store
    engine = create_engine(store, worker_url(store), application="cognis-admin")
    try:
        async with create_sessionmaker(engine)() as session, session.begin():
            return await action(TenantAdmin(session))
    finally:
        await engine.dispose()


async def _create_key(admin: TenantAdmin, tenant: str, name: str | None) -> IssuedKeyOut:
    issued = await admin.create_key((await admin.tenant(tenant)).id, name)
    return IssuedKeyOut(key=issued.plaintext, details=KeyOut.of(issued.key))


async def _list_keys(admin: TenantAdmin, tenant: str | None) -> list[KeyOut]:
    tenant_id = (await admin.tenant(tenant)).id if tenant else None
    return [KeyOut.of(k) for k in await admin.list_keys(tenant_id)]


async def _rotate(admin: TenantAdmin, prefix: str, grace_s: int) -> IssuedKeyOut:
    old, issued = await admin.rotate_key(prefix, grace_s)
    return IssuedKeyOut(
        key=issued.plaintext, details=KeyOut.of(issued.key), replaces=KeyOut.of(old)
    )


async def _revoke(admin: TenantAdmin, prefix: str) -> KeyOut:
    return KeyOut.of(await admin.revoke_key(prefix))


async def _create_tenant(admin: TenantAdmin, name: str) -> TenantOut:
    return TenantOut.of(await admin.create_tenant(name))


async def _list_tenants(admin: TenantAdmin) -> list[TenantOut]:
    return [TenantOut.of(t) for t in await admin.list_tenants()]


def _admin(args: argparse.Namespace) -> int:
    actions: dict[str, Callable[[TenantAdmin], Awaitable[Any]]] = {
        "tenant-create": lambda a: _create_tenant(a, args.name),
        "tenants": _list_tenants,
        "key-create": lambda a: _create_key(a, args.tenant, args.name),
        "keys": lambda a: _list_keys(a, args.tenant),
        "key-rotate": lambda a: _rotate(a, args.prefix, args.grace_s),
        "key-revoke": lambda a: _revoke(a, args.prefix),
    }
    return run_and_print(_in_transaction(actions[args.admin_command]))


def run_and_print(work: Coroutine[Any, Any, Any]) -> int:
    """An admin command's outcome: its result (or each item of a list) as a JSON line on
    stdout and 0, or the refusal's title and detail on stderr and 1."""
    try:
        result = asyncio.run(work)
    except CognisError as exc:
        print(f"{exc.title}: {exc.detail}", file=sys.stderr)
        return 1
    for item in result if isinstance(result, list) else [result]:
        print(json.dumps(msgspec.to_builtins(item)))
    return 0


def add_admin_commands(commands: Any) -> None:
    admin = commands.add_parser("admin", help="tenants and their API keys")
    admin.set_defaults(func=_admin)
    sub = admin.add_subparsers(dest="admin_command", required=True)
    sub.add_parser("tenant-create", help="create a tenant").add_argument("name")
    sub.add_parser("tenants", help="list tenants")
    create = sub.add_parser("key-create", help="create an API key of a tenant (id or name)")
    create.add_argument("tenant")
    create.add_argument("--name", help="a label for the key")
    keys = sub.add_parser("keys", help="list keys (prefixes, never secrets)")
    keys.add_argument("tenant", nargs="?", help="only this tenant's (id or name)")
    rotate = sub.add_parser("key-rotate", help="replace a key with a new one")
    rotate.add_argument("prefix")
    rotate.add_argument(
        "--grace-s", type=int, default=0, help="seconds the old key keeps working (default 0)"
    )
    sub.add_parser("key-revoke", help="revoke a key at once").add_argument("prefix")
