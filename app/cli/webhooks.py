"""`python -m app webhooks ...`: a tenant's webhook subscriptions, from the command line.

Talks to Postgres directly (COGNIS_DATABASE_URL), as `admin` does, bound to the tenant named
(id or name) like a request with its key: the same checks as `POST /v1/webhooks` (event types,
the URL refused in private ranges unless COGNIS_WEBHOOK_ALLOW_PRIVATE). Prints JSON; a new
subscription's secret is printed once."""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.api.schemas.webhooks import WebhookOut
from app.cli.admin import run_and_print
from app.config import get_settings
from app.db.engine import create_engine, create_sessionmaker, worker_url
from app.db.tenant import DEFAULT_TENANT_ID, tenant_scope
from app.errors import NotFoundError
from app.tenants.service import TenantAdmin
from app.webhooks import subscriptions
from app.webhooks.events import EVENT_TYPES


async def _in_tenant(tenant: str | None, action: Callable[[AsyncSession], Awaitable[Any]]) -> Any:
    # The worker role: the tenant's row is looked up with no tenant set (row-level security
    # shows every tenant's only to cognis_background, 0042); the action then runs bound to it.
    store = get_settings().store
    engine = create_engine(store, worker_url(store), application="cognis-admin")
    sessionmaker = create_sessionmaker(engine)
    try:
        tenant_id = DEFAULT_TENANT_ID
        if tenant is not None:
            async with sessionmaker() as session, session.begin():
                tenant_id = (await TenantAdmin(session).tenant(tenant)).id
        with tenant_scope(tenant_id):
            async with sessionmaker() as session, session.begin():
                return await action(session)
    finally:
        await engine.dispose()


async def _create(session: AsyncSession, url: str, event_types: list[str]) -> WebhookOut:
    allow_private = get_settings().relay.webhook_allow_private
    created = await subscriptions.create(session, url, event_types, allow_private=allow_private)
    return WebhookOut.of(created, secret=True)


async def _list(session: AsyncSession) -> list[WebhookOut]:
    return [WebhookOut.of(s) for s in await subscriptions.listed(session)]


async def _delete(session: AsyncSession, webhook_id: str) -> dict[str, str]:
    try:
        wanted = uuid.UUID(webhook_id)
    except ValueError:
        wanted = None
    if wanted is None or not await subscriptions.remove(session, wanted):
        raise NotFoundError(f"no webhook {webhook_id[:64]!r} in this tenant")
    return {"deleted": str(wanted)}


def _webhooks(args: argparse.Namespace) -> int:
    actions: dict[str, Callable[[AsyncSession], Awaitable[Any]]] = {
        "create": lambda s: _create(s, args.url, args.event_types or list(EVENT_TYPES)),
        "list": _list,
        "delete": lambda s: _delete(s, args.webhook_id),
    }
    return run_and_print(_in_tenant(args.tenant, actions[args.webhooks_command]))


def add_webhook_commands(commands: Any) -> None:
    webhooks = commands.add_parser(
        "webhooks", help="a tenant's webhook subscriptions (docs/webhooks.md)"
    )
    webhooks.set_defaults(func=_webhooks)
    sub = webhooks.add_subparsers(dest="webhooks_command", required=True)
    create = sub.add_parser("create", help="subscribe a receiver; prints its secret, once")
    create.add_argument("url")
    create.add_argument(
        "--event-type",
        dest="event_types",
        action="append",
        choices=EVENT_TYPES,
        help="a type to deliver (repeat it; default: every type)",
    )
    listed = sub.add_parser("list", help="the tenant's subscriptions (never their secrets)")
    delete = sub.add_parser("delete", help="delete a subscription and its deliveries")
    delete.add_argument("webhook_id")
    for command in (create, listed, delete):
        command.add_argument("--tenant", help="the tenant (id or name; default: the default one)")
