"""Console pages behind a login (login.py; the API key kept server-side, sealed: the HttpOnly
cookie holds a session secret, sessions.py): browse and act (edit, delete, erase, dry runs).
Every change is a POST carrying the session's CSRF token (guards.py). Every answer carries the
headers of headers.py."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from cognis_client import CognisError
from cognis_client.errors import error_from_response
from litestar import Controller, Request, Response, get, post
from litestar.exceptions import (
    NotAuthorizedException,
    PermissionDeniedException,
)
from litestar.params import Parameter
from litestar.response import Redirect
from sqlalchemy.ext.asyncio import AsyncSession

from app.console import queries, sessions
from app.console.diff import field_changes, word_diff
from app.console.forms import (
    DRY_RUN_FIELDS,
    DRY_RUN_SCOPES,
    filter_language,
    message_id,
    relevance_floor,
    replay_form,
    selected_version,
    shown_version,
    user_path,
)
from app.console.guards import (
    api,
    on_api_error,
    on_refused,
    require_console_key,
    require_form_token,
    to_login,
)
from app.console.headers import console_headers
from app.console.responses import COOKIE, Form, page, session_cookie
from app.memories.users import users_page
from app.search_index.outbox import pending_count
from app.search_index.relay import oldest_pending_age_s

PAGE_SIZE = 50


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
            "/console/login", status_code=303, cookies=[session_cookie(request, "", max_age=0)]
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
        return Redirect(user_path(user_id, f"/memories/{version.id}"), status_code=303)

    @post("/users/{user_id:str}/memories/{memory_id:str}/delete", guards=[require_form_token])
    async def delete(self, request: Request, user_id: str, memory_id: str, data: Form) -> Redirect:
        """Ends the memory's current version (it stays in the chain's history)."""
        async with api(request) as cognis:
            ended = await cognis.delete_memory(user_id, memory_id, if_match=shown_version(data))
        return Redirect(user_path(user_id, f"?deleted={ended.id}"), status_code=303)

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
            stored = await queries.message(db_session, user_id, message_id(message))
            if stored is None:
                raise CognisError(
                    404, "Not found", f"message {message} not found for user {user_id}", {}
                )
            form = replay_form(stored)
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
