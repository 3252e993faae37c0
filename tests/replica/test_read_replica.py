"""Reads on a real Postgres streaming replica (scripts/pg-replica.sh: pg_basebackup of the test
session's primary, hot standby on loopback), through a real API process whose
COGNIS_READ_DATABASE_URL names it: read-your-writes under replica lag made real with
`pg_wal_replay_pause()`, the writer at the wait's bound, the writer when the replica is killed,
and row security on the reader."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from app.db.engine import SERVER_SETTINGS, create_sessionmaker
from app.db.reads import ReadRouter
from app.db.tenant import DEFAULT_TENANT_ID, TENANT_SETTING
from tests import services
from tests.conftest import ROOT, ApiProcess

pytestmark = pytest.mark.xdist_group("read_replica")

SCRIPT = str(ROOT / "scripts" / "pg-replica.sh")
REPLICA_PORT = int(os.environ.get("COGNIS_PG_REPLICA_PORT", "55433"))
# The bound of a fresh read's wait for the replica: long enough for a resumed replay to catch
# up on a busy machine, short enough to wait out in a test.
WAIT_MAX_MS = 3000
# How long a failed replica rests before it is tried again.
RETRY_S = 1.0


def replica_script(*args: str) -> None:
    subprocess.run(["bash", SCRIPT, *args], check=True, cwd=ROOT, capture_output=True)


@pytest.fixture(scope="module")
def replica() -> Iterator[None]:
    """The replica of this session's local Postgres; stopped afterwards if started here."""
    if not (services.LOCAL_DIR / "postgres" / "data" / "PG_VERSION").exists():
        pytest.skip("a streaming replica needs the project's own local Postgres")
    running = subprocess.run(["bash", SCRIPT, "status"], capture_output=True).returncode == 0
    replica_script("start")
    yield
    if not running:
        replica_script("stop")


def on_replica(url: str) -> str:
    return make_url(url).set(port=REPLICA_PORT).render_as_string(hide_password=False)


@pytest.fixture(scope="module")
def replica_api(migrated: dict[str, str], replica: None) -> Iterator[ApiProcess]:
    env = {
        **migrated,
        "COGNIS_READ_DATABASE_URL": on_replica(migrated["COGNIS_DATABASE_URL"]),
        "COGNIS_REPLICA_WAIT_MAX_MS": str(WAIT_MAX_MS),
        "COGNIS_REPLICA_RETRY_S": str(RETRY_S),
    }
    process = ApiProcess(env, "api-replica")
    process.wait_ready()
    yield process
    process.stop()


@pytest.fixture
async def http(replica_api: ApiProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with replica_api.client() as client:
        yield client


@pytest.fixture
def paused_replay(replica: None) -> Iterator[None]:
    replica_script("pause")
    try:
        yield
    finally:
        replica_script("resume")


async def remember(http: httpx.AsyncClient, user_id: str, content: str) -> str:
    written = await http.post(
        f"/v1/users/{user_id}/memories", params={"wait_for": "indexed"}, json={"content": content}
    )
    assert written.status_code == 201, written.text
    assert written.headers["X-Index-State"] == "indexed"
    return str(written.json()["id"])


async def search(http: httpx.AsyncClient, user_id: str, query: str, consistency: str):
    found = await http.post(
        f"/v1/users/{user_id}/search", json={"query": query, "consistency": consistency}
    )
    assert found.status_code == 200, found.text
    return found, [hit["memory"]["id"] for hit in found.json()["results"]]


def route(response: httpx.Response) -> tuple[str, str | None]:
    return response.headers["X-Read-From"], response.headers.get("X-Read-Fallback")


async def test_reads_run_on_the_replica_and_see_the_writes_before_them(
    http: httpx.AsyncClient, user_id: str
) -> None:
    memory_id = await remember(http, user_id, "Ottilie rows on the Thames every Sunday.")
    listed = await http.get(f"/v1/users/{user_id}/memories")
    assert route(listed) == ("replica", None)
    assert [m["id"] for m in listed.json()["items"]] == [memory_id]
    history = await http.get(f"/v1/users/{user_id}/memories/{memory_id}/history")
    assert route(history) == ("replica", None) and len(history.json()["versions"]) == 1
    found, ids = await search(http, user_id, "Where does Ottilie row?", "indexed")
    assert route(found) == ("replica", None) and ids[:1] == [memory_id]
    assert found.json()["index_lag"]["stale"] is False
    # An eventual search does not wait; once the replica has replayed what the writer had when
    # it began (other databases of the cluster write too), it says it missed nothing.
    for _ in range(100):
        found, ids = await search(http, user_id, "Where does Ottilie row?", "eventual")
        if found.json()["index_lag"]["stale"] is False:
            break
        await asyncio.sleep(0.05)
    assert route(found) == ("replica", None) and ids[:1] == [memory_id]
    assert found.json()["index_lag"]["stale"] is False
    exported = await http.get(f"/v1/users/{user_id}/export")
    assert route(exported) == ("replica", None) and "rows on the Thames" in exported.text


async def test_under_paused_replay_a_fresh_read_waits_then_the_writer_answers(
    http: httpx.AsyncClient, user_id: str, paused_replay: None
) -> None:
    memory_id = await remember(http, user_id, "Ottilie's boat is called Heron.")
    # An eventual search reads the replica as it is: the write has not been replayed there.
    found, ids = await search(http, user_id, "What is Ottilie's boat called?", "eventual")
    assert route(found) == ("replica", None) and memory_id not in ids
    # It missed the caller's own write, and says so (the outbox it read there is as old).
    assert found.json()["index_lag"]["stale"] is True
    # A read that must see it waits for the replay up to the bound, then reads the writer.
    listed = await http.get(f"/v1/users/{user_id}/memories")
    assert route(listed) == ("writer", "replica_behind")
    assert float(listed.headers["X-Replica-Wait-Ms"]) >= WAIT_MAX_MS * 0.9
    assert [m["id"] for m in listed.json()["items"]] == [memory_id]
    found, ids = await search(http, user_id, "What is Ottilie's boat called?", "indexed")
    assert route(found) == ("writer", "replica_behind") and ids[:1] == [memory_id]
    assert found.json()["index_lag"]["stale"] is False


async def test_a_fresh_read_sees_the_write_through_the_replica_once_replay_catches_up(
    http: httpx.AsyncClient, user_id: str, paused_replay: None
) -> None:
    memory_id = await remember(http, user_id, "Ottilie coaches the junior crew on Tuesdays.")

    async def resume_soon() -> None:
        await asyncio.sleep(0.5)
        await asyncio.to_thread(replica_script, "resume")

    resuming = asyncio.create_task(resume_soon())
    found, ids = await search(http, user_id, "When does Ottilie coach?", "indexed")
    await resuming
    # Served by the replica, after waiting for it to replay the write.
    assert route(found) == ("replica", None) and ids[:1] == [memory_id]
    assert 0 < float(found.headers["X-Replica-Wait-Ms"]) < WAIT_MAX_MS


async def test_row_security_and_the_tenant_binding_hold_on_the_reader(
    http: httpx.AsyncClient, migrated: dict[str, str], user_id: str
) -> None:
    await remember(http, user_id, "Ottilie's club colours are green and white.")
    count = text("SELECT count(*) FROM memories WHERE user_id = :user")
    reader = on_replica(migrated["COGNIS_DATABASE_URL"])  # the service's role, on the replica
    seen = {}
    for tenant in (DEFAULT_TENANT_ID, "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d", None):
        settings = {**SERVER_SETTINGS, **({TENANT_SETTING: str(tenant)} if tenant else {})}
        engine = create_async_engine(reader, connect_args={"server_settings": settings})
        try:
            async with engine.connect() as connection:
                for _ in range(100):  # the write reaches the replica within moments
                    seen[tenant] = await connection.scalar(count, {"user": user_id})
                    if seen[tenant] or tenant != DEFAULT_TENANT_ID:
                        break
                    await connection.rollback()
                    await asyncio.sleep(0.05)
        finally:
            await engine.dispose()
    assert seen == {DEFAULT_TENANT_ID: 1, "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d": 0, None: 0}


async def test_a_killed_replica_sends_reads_to_the_writer_without_an_error(
    http: httpx.AsyncClient, user_id: str
) -> None:
    memory_id = await remember(http, user_id, "Ottilie keeps her oars in the boathouse.")
    answers: list[tuple[float, int, str, str | None, bool]] = []
    killed_at: list[float] = []
    stop = asyncio.Event()

    async def read_loop(n: int) -> None:
        while not stop.is_set():
            if n % 2:
                response = await http.get(f"/v1/users/{user_id}/memories")
                seen = response.status_code == 200 and memory_id in response.text
            else:
                response, ids = await search(http, user_id, "Where are the oars?", "eventual")
                seen = memory_id in ids
            fallback = response.headers.get("X-Read-Fallback")
            answers.append(
                (time.monotonic(), response.status_code, route(response)[0], fallback, seen)
            )

    readers = [asyncio.create_task(read_loop(n)) for n in range(4)]
    await asyncio.sleep(1.5)
    killed_at.append(time.monotonic())
    await asyncio.to_thread(replica_script, "kill")
    await asyncio.sleep(3)
    stop.set()
    await asyncio.gather(*readers)

    assert Counter(status for _, status, *_ in answers) == {200: len(answers)}
    assert all(seen for *_, seen in answers)
    before = [a for a in answers if a[0] < killed_at[0]]
    after = [a for a in answers if a[0] > killed_at[0] + 1]
    assert before and {a[2] for a in before} == {"replica"}
    assert after and {(a[2], a[3]) for a in after} == {("writer", "replica_unavailable")}

    # Started again, the replica serves reads once its rest has passed.
    for _ in range(30):
        try:
            replica_script("start")
            break
        except subprocess.CalledProcessError:  # the killed server's backends still exiting
            await asyncio.sleep(1)
    for _ in range(120):
        listed = await http.get(f"/v1/users/{user_id}/memories")
        assert listed.status_code == 200
        if route(listed) == ("replica", None):
            break
        await asyncio.sleep(0.5)
    assert route(listed) == ("replica", None)


async def test_an_eventual_read_says_whether_its_database_may_miss_earlier_writes(
    migrated: dict[str, str],
) -> None:
    """The decision without a replica: the writer itself posing as one reports no replay
    position, so an eventual read there cannot tell (None, which a search reports as stale);
    a fresh read goes to the writer, and a read with no replica configured misses nothing."""
    engine = create_async_engine(migrated["COGNIS_DATABASE_URL"])
    try:
        sessions = create_sessionmaker(engine)
        router = ReadRouter(sessions, sessions, wait_max_s=0.1, retry_s=1.0)
        _, eventual = await router.read(ping, fresh=False)
        assert (eventual.source, eventual.caught_up) == ("replica", None)
        _, fresh = await router.read(ping, fresh=True)
        assert (fresh.source, fresh.fallback, fresh.caught_up) == (
            "writer",
            "replica_position_unknown",
            True,
        )
        alone = ReadRouter(sessions, None, wait_max_s=0.1, retry_s=1.0)
        _, writer = await alone.read(ping, fresh=False)
        assert (writer.source, writer.caught_up) == ("writer", True)
    finally:
        await engine.dispose()


async def ping(session: AsyncSession) -> int:
    return int((await session.execute(text("SELECT 1"))).scalar_one())
