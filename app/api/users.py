"""User-level endpoints: the users list, and erasure of what a user (or one of its agents or
runs) left in both stores."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, delete, get
from litestar.di import Provide
from litestar.params import Parameter

from app.api.contract import COMMON, UserId, problems
from app.api.dependencies import provide_eraser
from app.api.reads import READ_HEADERS, Reads
from app.api.schemas.users import EraseOut, UserList, UserSummaryOut
from app.memories.erasure import UserEraser
from app.memories.fields import AgentId, RunId
from app.memories.users import users_after, users_cursor, users_page


class UserListController(Controller):
    path = "/v1/users"
    tags = ["users"]

    @get(
        "/",
        summary="List this tenant's users: memory counts and last change, by user id",
        responses=problems(*COMMON),
        response_headers=READ_HEADERS,
    )
    async def list_users(
        self,
        reads: Reads,
        prefix: Annotated[
            str | None,
            Parameter(max_length=128, description="Only user ids starting with this text."),
        ] = None,
        limit: Annotated[int, Parameter(ge=1, le=200)] = 50,
        cursor: Annotated[
            str | None,
            Parameter(max_length=256, description="`next_cursor` of the previous page, unchanged."),
        ] = None,
    ) -> UserList:
        after = users_after(cursor) if cursor else None
        # One more than asked says whether there is a next page.
        page = await reads(
            lambda session: users_page(session, after, limit + 1, prefix), fresh=True
        )
        more = len(page) > limit
        page = page[:limit]
        return UserList(
            items=[
                UserSummaryOut(
                    user_id=u.user_id,
                    memories=u.current,
                    versions=u.versions,
                    last_change=u.last_change,
                )
                for u in page
            ],
            next_cursor=users_cursor(page[-1]) if more else None,
        )


class UserController(Controller):
    path = "/v1/users/{user_id:str}"
    tags = ["users"]
    dependencies = {"eraser": Provide(provide_eraser)}

    @delete(
        "/",
        status_code=200,
        summary="Erase a user, or one agent's or run's part of it: physically remove the rows "
        "and documents",
        description="Without agent_id or run_id: every row and document of the user; a "
        "write of the user that began before the erase and was still in flight is refused "
        "(409), and every write sent after this response is accepted (the user starts "
        "anew). With agent_id and/or run_id: only the memories (every version) and messages "
        "of exactly that agent and/or run (both: that agent's in that run); the user's "
        "shared memories and other agents' and runs' stay, and no write is refused.",
        responses=problems(*COMMON),
    )
    async def erase_user(
        self,
        user_id: UserId,
        eraser: UserEraser,
        agent_id: Annotated[
            AgentId | None,
            Parameter(
                description="Erase only this agent's memories and messages (not the shared "
                "ones, which have no agent)."
            ),
        ] = None,
        run_id: Annotated[
            RunId | None,
            Parameter(
                description="Erase only this run's memories and messages (not those of no "
                "run). With agent_id: that agent's in this run."
            ),
        ] = None,
    ) -> EraseOut:
        if agent_id is not None or run_id is not None:
            erasure = await eraser.erase_scope(user_id, agent_id, run_id)
        else:
            erasure = await eraser.erase(user_id)
        return EraseOut(
            user_id=user_id,
            postgres=erasure.postgres,
            opensearch_deleted=erasure.opensearch_deleted,
            opensearch_pending=erasure.opensearch_deleted is None,
            erased_at=erasure.erased_at,
            writes_refused_until=None,
            guarantee=erasure.guarantee,
            agent_id=erasure.agent_id,
            run_id=erasure.run_id,
        )
