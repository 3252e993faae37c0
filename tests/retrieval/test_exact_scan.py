"""Stage 2a's exact scan for small users: the size check and that both scans agree."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.tenant import DEFAULT_TENANT_ID
from app.memories.repository import MemoryRepository
from app.memories.vectors import set_hnsw_scan
from app.ml.embedder import Embedder
from tests.retrieval.test_pipeline_api import _load

SET_TENANT = text("SELECT set_config('cognis.tenant_id', :t, true)")


async def test_a_user_within_the_limit_is_scanned_exactly_and_both_scans_agree(
    db, client, opensearch, index_name, user_id, other_user_id, inprocess_api
) -> None:
    await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [{"content": f"I planted {kind} in the garden"} for kind in ("roses", "tulips", "basil")],
    )
    await _load(client, opensearch, index_name, other_user_id, [{"content": "Roses are red"}])
    embedder: Embedder = inprocess_api.app.state.runtime.query_embedder
    query = await embedder.embed_query("what did I plant?")
    async with AsyncSession(db) as session, session.begin():
        await session.execute(SET_TENANT, {"t": str(DEFAULT_TENANT_ID)})
        # Three current memories: within a limit of 3, not of 2; 0 switches the check off.
        assert await set_hnsw_scan(session, 40, user_id, 3) is True
        assert await set_hnsw_scan(session, 40, user_id, 2) is False
        assert await set_hnsw_scan(session, 40, user_id, 0) is False
        repository = MemoryRepository(session)
        exact = await repository.coarse_candidates(user_id, query.coarse, None, 10, 40, 3)
        indexed = await repository.coarse_candidates(user_id, query.coarse, None, 10, 40, 0)
    assert len(exact) == 3  # the user's own memories only
    assert [memory_id for memory_id, _ in exact] == [memory_id for memory_id, _ in indexed]
    scores = [score for _, score in exact]
    assert scores == sorted(scores, reverse=True)
