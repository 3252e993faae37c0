"""Console pages: log in with an API key (kept server-side, sealed: the HttpOnly cookie holds
a session secret, sessions.py), then browse and act (edit, delete, erase, dry runs): every
change is a POST carrying the session's CSRF token. Every answer carries the headers of
headers.py."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from cognis_client import AsyncCognisClient, CognisError, History
from cognis_client.errors import error_from_response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from litestar import Controller, MediaType, Request, Response, get, post
from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie
from litestar.enums import RequestEncodingType
from litestar.exceptions import (
    NotAuthorizedException,
    NotFoundException,
    PermissionDeniedException,
)
from litestar.handlers.base import BaseRouteHandler
from litestar.params import Body, Parameter
from litestar.response import Redirect
from sqlalchemy.ext.asyncio import AsyncSession

from app.console import csrf, queries, sessions
from app.console.diff import field_changes, word_diff
from app.console.headers import console_headers
from app.db.models import Message
from app.db.tenant import act_as
from app.in_process import in_process_client
from app.memories.users import users_page
from app.retrieval.pipeline import STAGES
from app.search_index.outbox import pending_count
from app.search_index.relay import oldest_pending_age_s
from app.tenants.authentication import API_KEY_HEADER
from app.vocabulary import SEED_CATEGORIES

COOKIE = "cognis_console_session"
STATIC = Path(__file__).parent / "static"
ASSETS = {"console.css": "text/css; charset=utf-8", "console.js": "text/javascript; charset=utf-8"}
PAGE_SIZE = 50
TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(),
)
TEMPLATES.globals["categories"] = SEED_CATEGORIES
Form = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]


def render(template: str, status_code: int = 200, **context: Any) -> Response[str]:
    """A page; with `csrf` (the session's token) it is a logged-in page: navigation, forms."""
    html = TEMPLATES.get_template(template).render(stages=STAGES, **context)
    return Response(html, media_type=MediaType.HTML, status_code=status_code)


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> Response[str]:
    """A logged-in page: its forms carry the session's CSRF token."""
    token = csrf.session_token(request.cookies.get(COOKIE, ""))
    return render(template, status_code, csrf=token, **context)


async def _form(connection: ASGIConnection) -> dict[str, Any]:
    """The posted form (parsed once: the handler's `data` reads the same parse)."""
    return dict(await connection.form()) if isinstance(connection, Request) else {}


async def require_form_token(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """Every change: the form carries the token of this session's cookie, or nothing happens."""
    secret = connection.cookies.get(COOKIE)
    given = (await _form(connection)).get(csrf.FIELD)
    if not csrf.accepted(given, csrf.session_token(secret) if secret else None):
        raise PermissionDeniedException(csrf.REFUSED)


async def require_console_key(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    """The session's key (kept server-side) and its tenant, which binds the page's queries, as
    the API's key check does; no session, an expired one, or a key revoked since: log in."""
    act_as(None)
    runtime = connection.app.state.runtime
    secret = connection.cookies.get(COOKIE)
    key = await sessions.session_key(runtime.sessionmaker, secret) if secret else None
    tenant_id = await runtime.keys.tenant_of(key) if key else None
    if key is None or tenant_id is None:
        raise NotAuthorizedException("log in with an API key")
    connection.state.console_key = key
    act_as(tenant_id)


def to_login(_: Request, __: NotAuthorizedException) -> Response[Any]:
    return Redirect("/console/login")


def on_api_error(request: Request, exc: CognisError) -> Response[str]:
    return page(request, "error.html", exc.status, error=exc, path=request.url.path)


def on_refused(request: Request, exc: PermissionDeniedException) -> Response[str]:
    error = CognisError(403, "Form refused", exc.detail, {})
    return page(request, "error.html", 403, error=error, path=request.url.path)


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
    """The public API, in process, with the logged-in key (found by require_console_key)."""
    return _Api(in_process_client(request.app, {API_KEY_HEADER: request.state.console_key}))


def _cookie(request: Request, name: str, value: str, max_age: int | None = None) -> Cookie:
    """A cookie for the console's pages only, out of reach of scripts and other sites."""
    return Cookie(
        key=name,
        value=value,
        path="/console",
        max_age=max_age,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def _session_cookie(request: Request, secret: str, max_age: int | None = None) -> Cookie:
    return _cookie(request, COOKIE, secret, max_age)


def _login_form(request: Request, status_code: int = 200, **context: Any) -> Response[str]:
    """The login page; its form's token pairs with the pre-session cookie (set here if absent)."""
    nonce = request.cookies.get(csrf.LOGIN_COOKIE)
    cookies = []
    if not nonce:
        nonce = csrf.new_nonce()
        cookies.append(_cookie(request, csrf.LOGIN_COOKIE, nonce))
    response = render("login.html", status_code, login_token=csrf.login_token(nonce), **context)
    response.cookies.extend(cookies)
    return response


class ConsoleLogin(Controller):
    path = "/console"
    include_in_schema = False
    middleware = [console_headers]

    @get("/static/{name:str}")
    async def asset(self, name: str) -> Response[bytes]:
        """The console's stylesheet and script (files, so the CSP allows nothing inline)."""
        if name not in ASSETS:
            raise NotFoundException(f"no console asset {name!r}")
        return Response((STATIC / name).read_bytes(), media_type=ASSETS[name])

    @get("/login")
    async def login_form(self, request: Request) -> Response[str]:
        return _login_form(request)

    @post("/login")
    async def log_in(
        self,
        request: Request,
        data: Form,
    ) -> Response[Any]:
        nonce = request.cookies.get(csrf.LOGIN_COOKIE)
        if not csrf.accepted(data.get(csrf.FIELD), csrf.login_token(nonce) if nonce else None):
            # A form from another site (login CSRF) or a stale one: no cookie is set or changed.
            error = CognisError(
                403,
                "Log in refused",
                "This login form did not come from this console's login page (or that page "
                "has expired): nobody was logged in. Open the login page and log in there.",
                {},
            )
            return render("error.html", 403, error=error, path=request.url.path)
        key = data.get("key", "").strip()
        runtime = request.app.state.runtime
        if not key or await runtime.keys.tenant_of(key) is None:
            return _login_form(request, 401, error="That key is not accepted.")
        lifetime_s = runtime.settings.api.console_session_hours * 3600
        secret = await sessions.open_session(runtime.sessionmaker, key, lifetime_s)
        # The pre-session cookie is spent: the session's own token takes over.
        return Redirect(
            "/console",
            status_code=303,
            cookies=[
                _session_cookie(request, secret, max_age=int(lifetime_s)),
                _cookie(request, csrf.LOGIN_COOKIE, "", 0),
            ],
        )


class ConsolePages(Controller):
    path = "/console"
    include_in_schema = False
    guards = [require_console_key]
    middleware = [console_headers]
    exception_handlers = {
        NotAuthorizedException: to_login,
        PermissionDeniedException: on_refused,
        CognisError: on_api_error,
    }

    @get("/logout")
    async def log_out_form(self, request: Request) -> Response[str]:
        """A GET never logs out (a link or an image on another page could): it asks."""
        return page(request, "logout.html")

    @post("/logout", guards=[require_form_token])
    async def log_out(self, request: Request) -> Response[Any]:
        # The session ends here, not only in this browser: its cookie opens nothing any more.
        secret = request.cookies.get(COOKIE, "")
        await sessions.close_session(request.app.state.runtime.sessionmaker, secret)
        return Redirect(
            "/console/login", status_code=303, cookies=[_session_cookie(request, "", max_age=0)]
        )

    @get("/")
    async def users(
        self,
        request: Request,
        db_session: AsyncSession,
        after: str | None = None,
        prefix: str | None = None,
    ) -> Response[str]:
        users = await users_page(db_session, after, PAGE_SIZE, prefix)
        next_after = users[-1].user_id if len(users) == PAGE_SIZE else None
        return page(
            request,
            "users.html",
            users=users,
            next_after=next_after,
            prefix=prefix or "",
        )

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
        deleted: str | None = None,
    ) -> Response[str]:
        # The filter bar: each field as the list's own parameter, `where` in the filter
        # language (docs/api.md, "Filters"), checked by the API like any client's.
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
            memories = await cognis.list_memories(
                user_id,
                include_superseded=include_superseded,
                limit=PAGE_SIZE,
                cursor=cursor,
                **options,  # type: ignore[typeddict-item]
            )
        return page(
            request,
            "memories.html",
            user_id=user_id,
            page=memories,
            filters=filters,
            include_superseded=include_superseded,
            deleted=deleted,
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
        return page(
            request,
            "chain.html",
            user_id=user_id,
            history=history,
            steps=steps,
            selected=selected_version(history, memory_id),
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
        return page(
            request, "search.html", user_id=user_id, q=q, top_k=top_k, result=result, **form
        )

    @get("/users/{user_id:str}/jobs")
    async def jobs(self, request: Request, db_session: AsyncSession, user_id: str) -> Response[str]:
        job_ids = await queries.recent_job_ids(db_session, user_id, 20)
        async with api(request) as cognis:
            jobs = [await cognis.get_job(user_id, job_id) for job_id in job_ids]
        return page(request, "jobs.html", user_id=user_id, jobs=jobs)

    @get("/outbox")
    async def outbox(self, request: Request, db_session: AsyncSession) -> Response[str]:
        settings = request.app.state.runtime.settings
        return page(
            request,
            "outbox.html",
            pending=await pending_count(db_session),
            oldest_s=await oldest_pending_age_s(db_session),
            failing=await queries.failing_outbox_events(db_session, 50),
            relay_in_api=settings.relay.relay_in_api,
            poll_interval_s=settings.relay.relay_poll_interval_s,
            batch_size=settings.relay.relay_batch_size,
        )

    # Actions: each a POST whose form carries the session's token (require_form_token).

    @post("/users/{user_id:str}/memories/{memory_id:str}/edit", guards=[require_form_token])
    async def edit(self, request: Request, user_id: str, memory_id: str, data: Form) -> Redirect:
        """A new version of the memory (PATCH): the chain then shows it, selected."""
        changes = {"content": data.get("content", "")}
        if data.get("category", "").strip():
            changes["category"] = data["category"].strip()
        async with api(request) as cognis:
            version = await cognis.update_memory(
                user_id, memory_id, if_match=shown_version(data), **changes
            )
        return Redirect(_user_path(user_id, f"/memories/{version.id}"), status_code=303)

    @post("/users/{user_id:str}/memories/{memory_id:str}/delete", guards=[require_form_token])
    async def delete(self, request: Request, user_id: str, memory_id: str, data: Form) -> Redirect:
        """Ends the memory's current version (it stays in the chain's history)."""
        async with api(request) as cognis:
            ended = await cognis.delete_memory(user_id, memory_id, if_match=shown_version(data))
        return Redirect(_user_path(user_id, f"?deleted={ended.id}"), status_code=303)

    @get("/users/{user_id:str}/erase")
    async def erase_form(self, request: Request, user_id: str) -> Response[str]:
        return page(request, "erase.html", user_id=user_id)

    @post("/users/{user_id:str}/erase", guards=[require_form_token])
    async def erase(self, request: Request, user_id: str, data: Form) -> Response[str]:
        """Erases the user only when the form names it again, typed: anything else erases
        nothing and says why."""
        typed = data.get("confirm", "")
        if typed != user_id:
            error = (
                f"You typed {typed!r}, which is not the user id {user_id!r}: nothing was erased. "
                "Type the user id exactly as shown to erase this user."
            )
            return page(request, "erase.html", 400, user_id=user_id, error=error)
        async with api(request) as cognis:
            receipt = await cognis.erase_user(user_id)
        return page(request, "erase.html", user_id=user_id, receipt=receipt)

    @get("/users/{user_id:str}/dry-run")
    async def dry_run_form(
        self, request: Request, db_session: AsyncSession, user_id: str, message: str | None = None
    ) -> Response[str]:
        """The dry run's form, empty or filled with a stored message to replay."""
        form = {"content": "", "speaker": "", "timestamp": "", "role": "user"}
        form.update(DRY_RUN_SCOPES)
        if message:
            stored = await queries.message(db_session, user_id, _message_id(message))
            if stored is None:
                raise CognisError(
                    404, "Not found", f"message {message} not found for user {user_id}", {}
                )
            form = _replay_form(stored)
        return page(request, "dry_run.html", user_id=user_id, form=form, result=None)

    @post("/users/{user_id:str}/dry-run", guards=[require_form_token])
    async def dry_run(self, request: Request, user_id: str, data: Form) -> Response[str]:
        """The decisions the message would lead to now (POST .../messages?dry_run=true):
        nothing is saved or applied."""
        form = {name: data.get(name, "").strip() for name in DRY_RUN_FIELDS}
        message: dict[str, Any] = {k: v for k, v in form.items() if v}
        message["content"] = data.get("content", "")
        async with api(request) as cognis:
            response = await cognis.http.post(
                f"/v1/users/{quote(user_id, safe='')}/messages",
                params={"dry_run": "true"},
                json={"messages": [message]},
            )
        if not response.is_success:
            raise error_from_response(response)
        # The answer as sent (the client has no dry-run call yet): the page reads its fields.
        result = response.json()
        return page(request, "dry_run.html", user_id=user_id, form=form, result=result)


DRY_RUN_SCOPES = {"session_id": "", "agent_id": "", "run_id": ""}
DRY_RUN_FIELDS = ("content", "speaker", "timestamp", "role", *DRY_RUN_SCOPES)


def selected_version(history: History, memory_id: str) -> str:
    """The version a chain page selects: the one a version's id names, else (the memory's
    id) the current version, or the last one of a deleted memory."""
    if memory_id in {str(history.id), str(history.chain_id)}:
        shown = history.current or history.versions[-1]
        return str(shown.version_id or shown.id)
    return memory_id


def shown_version(form: dict[str, str]) -> str | None:
    """The version a page showed when its form was posted (If-Match): a change made from a
    page that someone else's change has overtaken since is refused (412), not applied."""
    return form.get("version") or None


def _user_path(user_id: str, rest: str = "") -> str:
    return f"/console/users/{quote(user_id, safe='')}{rest}"


def _message_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise CognisError(400, "Invalid message id", f"{text[:64]!r} is not a UUID", {}) from None


def _replay_form(stored: Message) -> dict[str, str]:
    """A stored message as the dry run's form: said when and by whom it was, in its sender's
    UTC offset (relative dates resolve against that)."""
    offset = timedelta(minutes=stored.utc_offset_minutes or 0)
    sent_at = stored.sent_at.astimezone(timezone(offset) if offset else UTC)
    return {
        "content": stored.content,
        "speaker": stored.speaker or "",
        "timestamp": sent_at.isoformat(),
        "role": stored.role,
        "session_id": stored.session_id or "",
        "agent_id": stored.agent_id or "",
        "run_id": stored.run_id or "",
    }
