"""Console pages: log in with an API key (kept in an HttpOnly cookie), then browse."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from cognis_client import AsyncCognisClient, CognisError
from jinja2 import Environment, FileSystemLoader, select_autoescape
from litestar import Controller, MediaType, Request, Response, get, post
from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie
from litestar.enums import RequestEncodingType
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler
from litestar.params import Body, Parameter
from litestar.response import Redirect
from sqlalchemy.ext.asyncio import AsyncSession

from app.console import queries
from app.console.diff import field_changes, word_diff
from app.db.tenant import act_as
from app.in_process import in_process_client
from app.memories.users import users_page
from app.retrieval.pipeline import STAGES
from app.search_index.outbox import pending_count
from app.search_index.relay import oldest_pending_age_s
from app.tenants.authentication import API_KEY_HEADER

COOKIE = "cognis_console_key"
PAGE_SIZE = 50
TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(),
)


def render(template: str, status_code: int = 200, **context: Any) -> Response[str]:
    html = TEMPLATES.get_template(template).render(stages=STAGES, **context)
    return Response(html, media_type=MediaType.HTML, status_code=status_code)


async def require_console_key(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """The logged-in key's tenant binds the page's queries, as the API's key check does."""
    act_as(None)
    key = connection.cookies.get(COOKIE)
    tenant_id = await connection.app.state.runtime.keys.tenant_of(key) if key else None
    if tenant_id is None:
        raise NotAuthorizedException("log in with an API key")
    act_as(tenant_id)


def to_login(_: Request, __: NotAuthorizedException) -> Response[Any]:
    return Redirect("/console/login")


def on_api_error(request: Request, exc: CognisError) -> Response[str]:
    return render("error.html", exc.status, error=exc, path=request.url.path)


def relevance_floor(text: str | None) -> float | None:
    """The search form's floor: empty is none; the API checks the range."""
    if text is None or not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        raise CognisError(
            400, "Invalid floor", f"min relevance must be a number from 0 to 1, not {text!r}", {}
        ) from None


def filter_language(text: str) -> Any:
    """The filter bar's JSON, parsed; not JSON: the same kind of error page as the API's 400
    (the API checks the filter itself)."""
    try:
        return json.loads(text)
    except ValueError as error:
        raise CognisError(
            400,
            "Invalid filter",
            f"the filter is not JSON ({error}); write it in the filter language, e.g. "
            '{"field": "category", "op": "eq", "value": "hobbies"}',
            {},
        ) from None


@dataclass
class _Api:
    client: AsyncCognisClient

    async def __aenter__(self) -> AsyncCognisClient:
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()


def api(request: Request) -> _Api:
    """The public API, in process, with the logged-in key."""
    key = request.cookies.get(COOKIE, "")
    return _Api(in_process_client(request.app, {API_KEY_HEADER: key}))


def _key_cookie(request: Request, key: str, max_age: int | None = None) -> Cookie:
    """The key, for the console's pages only, out of reach of scripts and other sites."""
    return Cookie(
        key=COOKIE,
        value=key,
        path="/console",
        max_age=max_age,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


class ConsoleLogin(Controller):
    path = "/console"
    include_in_schema = False

    @get("/login")
    async def login_form(self) -> Response[str]:
        return render("login.html")

    @post("/login")
    async def log_in(
        self,
        request: Request,
        data: Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)],
    ) -> Response[Any]:
        key = data.get("key", "").strip()
        if not key or await request.app.state.runtime.keys.tenant_of(key) is None:
            return render("login.html", 401, error="That key is not accepted.")
        return Redirect("/console", cookies=[_key_cookie(request, key)])

    @get("/logout")
    async def log_out(self, request: Request) -> Response[Any]:
        return Redirect("/console/login", cookies=[_key_cookie(request, "", max_age=0)])


class ConsolePages(Controller):
    path = "/console"
    include_in_schema = False
    guards = [require_console_key]
    exception_handlers = {NotAuthorizedException: to_login, CognisError: on_api_error}

    @get("/")
    async def users(
        self, db_session: AsyncSession, after: str | None = None, prefix: str | None = None
    ) -> Response[str]:
        page = await users_page(db_session, after, PAGE_SIZE, prefix)
        next_after = page[-1].user_id if len(page) == PAGE_SIZE else None
        return render("users.html", users=page, next_after=next_after, prefix=prefix or "")

    @get("/users/{user_id:str}")
    async def memories(
        self,
        request: Request,
        user_id: str,
        category: str | None = None,
        memory_scope: Annotated[str | None, Parameter(query="scope")] = None,
        session_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        where: str | None = None,
        include_superseded: bool = False,
        cursor: str | None = None,
    ) -> Response[str]:
        # The filter bar: each field as the list's own parameter, `where` in the filter
        # language (README, "Filters"), checked by the API like any client's.
        filters = {
            "category": category or None,
            "scope": memory_scope or None,
            "session_id": session_id or None,
            "agent_id": agent_id or None,
            "run_id": run_id or None,
            "where": where.strip() if where and where.strip() else None,
        }
        options = {k: v for k, v in filters.items() if v and k != "where"}
        if filters["where"]:
            options["filters"] = filter_language(filters["where"])
        async with api(request) as cognis:
            page = await cognis.list_memories(
                user_id,
                include_superseded=include_superseded,
                limit=PAGE_SIZE,
                cursor=cursor,
                **options,  # type: ignore[typeddict-item]
            )
        return render(
            "memories.html",
            user_id=user_id,
            page=page,
            filters=filters,
            include_superseded=include_superseded,
        )

    @get("/users/{user_id:str}/memories/{memory_id:str}")
    async def chain(self, request: Request, user_id: str, memory_id: str) -> Response[str]:
        async with api(request) as cognis:
            history = await cognis.history(user_id, memory_id)
        steps = [
            {
                "memory": version,
                "spans": word_diff(previous.content, version.content) if previous else None,
                "fields": field_changes(previous, version) if previous else [],
            }
            for previous, version in zip([None, *history.versions], history.versions, strict=False)
        ]
        return render(
            "chain.html", user_id=user_id, history=history, steps=steps, selected=memory_id
        )

    @get("/users/{user_id:str}/search")
    async def search(
        self,
        request: Request,
        user_id: str,
        q: str = "",
        session_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        where: str | None = None,
        min_relevance: str | None = None,  # a form's empty field arrives as ""
        top_k: Annotated[int, Parameter(ge=1, le=100)] = 10,
    ) -> Response[str]:
        result = None
        floor = relevance_floor(min_relevance)
        form: dict[str, Any] = {
            "session_id": session_id or "",
            "agent_id": agent_id or "",
            "run_id": run_id or "",
            "where": (where or "").strip(),
            "min_relevance": "" if floor is None else f"{floor:g}",
        }
        if q.strip():
            options: dict[str, Any] = {
                k: v for k, v in form.items() if v and k not in ("where", "min_relevance")
            }
            if form["where"]:
                options["filters"] = filter_language(form["where"])
            if floor is not None:
                options["min_relevance"] = floor
            async with api(request) as cognis:
                result = await cognis.search(user_id, q, top_k=top_k, explain=True, **options)
        return render("search.html", user_id=user_id, q=q, top_k=top_k, result=result, **form)

    @get("/users/{user_id:str}/jobs")
    async def jobs(self, request: Request, db_session: AsyncSession, user_id: str) -> Response[str]:
        job_ids = await queries.recent_job_ids(db_session, user_id, 20)
        async with api(request) as cognis:
            jobs = [await cognis.get_job(user_id, job_id) for job_id in job_ids]
        return render("jobs.html", user_id=user_id, jobs=jobs)

    @get("/outbox")
    async def outbox(self, request: Request, db_session: AsyncSession) -> Response[str]:
        settings = request.app.state.runtime.settings
        return render(
            "outbox.html",
            pending=await pending_count(db_session),
            oldest_s=await oldest_pending_age_s(db_session),
            failing=await queries.failing_outbox_events(db_session, 50),
            relay_in_api=settings.relay_in_api,
            poll_interval_s=settings.relay_poll_interval_s,
            batch_size=settings.relay_batch_size,
        )
