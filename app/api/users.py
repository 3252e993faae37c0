"""User-level endpoints: erasure of everything a user left in both stores."""

from __future__ import annotations

from litestar import Controller, delete
from litestar.di import Provide

from app.api.contract import COMMON, UserId, problems
from app.api.dependencies import provide_eraser
from app.api.schemas.users import EraseOut
from app.memories.erasure import UserEraser


class UserController(Controller):
    path = "/v1/users/{user_id:str}"
    tags = ["users"]
    dependencies = {"eraser": Provide(provide_eraser)}

    @delete(
        "/",
        status_code=200,
        summary="Erase a user: physically remove every row and document",
        responses=problems(*COMMON),
    )
    async def erase_user(self, user_id: UserId, eraser: UserEraser) -> EraseOut:
        erasure = await eraser.erase(user_id)
        return EraseOut(
            user_id=user_id,
            postgres=erasure.postgres,
            opensearch_deleted=erasure.opensearch_deleted,
            opensearch_pending=erasure.opensearch_deleted is None,
            erased_at=erasure.erased_at,
            writes_refused_until=erasure.window.writes_refused_until,
            guarantee=erasure.guarantee,
        )
