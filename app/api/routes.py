"""The REST API as the composition mounts it (app/asgi.py): its route handlers behind their key
guards, and its OpenAPI description."""

from __future__ import annotations

from litestar import Router
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme
from litestar.types import ControllerRouterHandler

from app import __version__
from app.api.admin import TenantAdminController
from app.api.auth import require_admin_key, require_api_key
from app.api.context import ContextController
from app.api.dependencies import provide_runtime
from app.api.entities import EntityController
from app.api.exports import ExportController
from app.api.health import health, metrics_endpoint, ready
from app.api.imports import ImportController
from app.api.mem0 import Mem0Controller
from app.api.memories import MemoryController
from app.api.messages import MessageController
from app.api.reads import provide_reads
from app.api.search import SearchController
from app.api.users import UserController, UserListController
from app.api.webhooks import WebhookController
from app.tenants.authentication import API_KEY_HEADER


def api_route_handlers() -> list[ControllerRouterHandler]:
    """Health and metrics (open), the memory API (a tenant's key), the admin API (admin key)."""
    api = Router(
        path="/",
        route_handlers=[
            MemoryController,
            ImportController,
            ExportController,
            MessageController,
            SearchController,
            ContextController,
            EntityController,
            UserController,
            UserListController,
            WebhookController,
            Mem0Controller,
        ],
        guards=[require_api_key],
        dependencies={"runtime": Provide(provide_runtime), "reads": Provide(provide_reads)},
        security=[{"apiKey": []}],
    )
    admin = Router(
        path="/",
        route_handlers=[TenantAdminController],
        guards=[require_admin_key],
        security=[{"apiKey": []}],
    )
    return [health, ready, metrics_endpoint, api, admin]


def openapi_config() -> OpenAPIConfig:
    return OpenAPIConfig(
        title="Cognis Memory",
        version=__version__,
        description="Long-term memory for conversational AI agents.",
        path="/schema",
        components=Components(
            security_schemes={
                "apiKey": SecurityScheme(
                    type="apiKey", name=API_KEY_HEADER, security_scheme_in="header"
                )
            }
        ),
    )
