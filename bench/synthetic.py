"""A database of many users, written by SQL (generate_series), not through the model: the
shape of a service that has run for a year, at sizes no embedding run could reach here.

One `fill` call writes `users` users of one tenant, each with `chains` memories of
`versions` versions (the last current, the others superseded by their successor; one chain in
`deleted_every` ends deleted instead: its last version superseded with no successor, halfway
between its writing and now), `messages` messages, one done ingestion task per message, one
decision per version (ADD for a version 1, UPDATE for the others, naming the version it
replaced), one delivered outbox event per ten versions, and every version's
`source_message_id` pointing at one of the user's messages (versions spread evenly over
them). Times are spread evenly over `days` up to now: a chain's version v is written after
every chain's version v - 1 (memories are made, then updated).

Ids are md5 of (tag, user, chain, version), so the statements can name a version's
predecessor and source message without reading anything back. Vectors are zero vectors
(`vectors="zero"`: pgvector stores a vector uncompressed, out of line past 2 kB, so a zero
vector takes the same heap and TOAST space as a real one, but a cosine HNSW index leaves zero
vectors out, so its build costs nothing: for benchmarks of what does not search) or random
ones (`vectors="random"`: what a dump's compression meets in real data). Messages carry both
vectors only with random vectors.

The secondary indexes of the filled tables are dropped before and built again after (as
`pg_get_indexdef` had them): building an index once is far cheaper than maintaining it row by
row, and the schema afterwards is the migrated one. Then VACUUM ANALYZE, as a database that
has been running would be.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Integer, bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

FILLED = ("memories", "messages", "ingest_tasks", "ingest_decisions", "outbox")
_SECONDARY = text(
    "SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS definition"
    " FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid"
    " WHERE t.relname = ANY(:tables) AND t.relnamespace = 'public'::regnamespace"
    " AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)"
    " ORDER BY 1"
)
# Typed, so that Postgres reads `:first + :users` as integers (asyncpg binds them cast).
_INTEGERS = ("first", "users", "chains", "versions", "messages", "deleted_every")
_SET_TENANT = text("SELECT set_config('cognis.tenant_id', :t, true)")
_ZERO = "array_fill(0::real, ARRAY[{n}])::vector"
# Correlated with the row (the + 0 * ...), so it is drawn again for every row.
_RANDOM = "(SELECT array_agg(random()::real) FROM generate_series(1, {n} + 0 * {row}))::vector"


@dataclass(frozen=True, slots=True)
class Users:
    """`users` users of one tenant, all of the same shape (see the module's docstring)."""

    tenant_id: uuid.UUID
    prefix: str  # user ids are prefix + number; prefix "alice" with users=1 makes "alice0"
    users: int
    chains: int
    versions: int
    messages: int
    days: float = 365.0
    deleted_every: int = 20
    first: int = 0  # the first user's number

    @property
    def memory_versions(self) -> int:
        return self.users * self.chains * self.versions


def _vector(kind: str, n: int, row: str) -> str:
    return _ZERO.format(n=n) if kind == "zero" else _RANDOM.format(n=n, row=row)


def _statements(vectors: str) -> list[str]:
    """The INSERTs of one batch of users: messages and their tasks, then memories (naming
    them), decisions and outbox events. :tag makes the ids; u is a user's number, c a chain's,
    v a version's, k a message's."""
    # A version's time: step (v - 1) * chains + c + 1 of versions * chains + 1, over :days up
    # to now (the last versions were written just now); a message's: step k + 0.5 of
    # :messages. A deleted chain's last version ends halfway between its writing and now.
    span = "make_interval(secs => CAST(:days AS float8) * 86400.0 * (1 - {share}))"
    at = "now() - " + span.format(
        share="(({v} - 1) * :chains + c + 1)::float / (:versions * :chains + 1)"
    )
    sent = "now() - " + span.format(share="(k + 0.5) / :messages")
    user = "CAST(:prefix AS text) || u"
    version_id = "md5(CAST(:tag AS text) || ':' || u || ':' || c || ':' || ({v}))::uuid"
    message_id = "md5(CAST(:tag AS text) || ':m:' || u || ':' || ({k}))::uuid"
    deleted = "(c % :deleted_every = 0)"
    users = "generate_series(:first, :first + :users - 1) u"
    messages = f"{users}, generate_series(0, :messages - 1) k"
    # Every version of the batch's users, with what each table says of it.
    versions = (
        f"SELECT u, c, v, {version_id.format(v='v')} AS id, {user} AS user_id,"
        f" {version_id.format(v='1')} AS chain_id,"
        f" CASE WHEN v > 1 THEN {version_id.format(v='v - 1')} END AS replaces_id,"
        f" {at.format(v='v')} AS created_at,"
        f" CASE WHEN v < :versions THEN {at.format(v='v + 1')}"
        f" WHEN {deleted} THEN now() - (now() - ({at.format(v='v')})) / 2"
        " END AS superseded_at,"
        # The message it came from: versions spread evenly over the user's messages.
        " "
        + message_id.format(k="((v - 1) * :chains + c)::bigint * :messages / (:chains * :versions)")
        + " AS source_message_id,"
        f" 'fact ' || c || ' of ' || {user} || ', as told the ' || v || 'th time:'"
        " || ' likes hiking in the hills near the lake on weekends' AS content,"
        " cats.names[1 + c % cardinality(cats.names)] AS category"
        " FROM (SELECT array_agg(name ORDER BY name) AS names FROM categories) cats,"
        f" {users}, generate_series(0, :chains - 1) c, generate_series(1, :versions) v"
    )
    message_vectors = (
        f"{_vector(vectors, 768, 'k')}, {_vector(vectors, 256, 'k')}"
        if vectors == "random"
        else "NULL, NULL"
    )
    return [
        "INSERT INTO messages (id, user_id, content, sent_at, created_at, embedding_768d,"
        " embedding_256d)"
        f" SELECT {message_id.format(k='k')}, {user},"
        f" 'message ' || k || ' of ' || {user} || ': we talked about plans for the week',"
        f" {sent}, {sent}, {message_vectors} FROM {messages}",
        "INSERT INTO ingest_tasks (message_id, job_id, user_id, sent_at, state, attempts,"
        " created_at, finished_at)"
        f" SELECT {message_id.format(k='k')}, {message_id.format(k='k')}, {user},"
        f" {sent}, 'done', 1, {sent}, {sent} FROM {messages}",
        "INSERT INTO memories (id, user_id, chain_id, version, content, category, is_current,"
        " replaces_id, created_at, superseded_at, event_time, language, embedding_768d,"
        " embedding_256d, source_message_id)"
        " SELECT id, user_id, chain_id, v, content, category, superseded_at IS NULL,"
        " replaces_id, created_at, superseded_at, created_at, 'en',"
        f" {_vector(vectors, 768, 'v')}, {_vector(vectors, 256, 'v')}, source_message_id"
        f" FROM ({versions}) s",
        "INSERT INTO ingest_decisions (job_id, message_id, user_id, position, operation,"
        " target_memory_id, memory_id, content, category, extractor, created_at)"
        " SELECT source_message_id, source_message_id, user_id, v % 2,"
        " CASE WHEN v = 1 THEN 'ADD' ELSE 'UPDATE' END, replaces_id, id, content, category,"
        f" 'llm', created_at FROM ({versions}) s",
        "INSERT INTO outbox (user_id, op, memory_id, created_at, processed_at, attempts)"
        f" SELECT user_id, 'index', id, created_at, created_at, 1 FROM ({versions}) s"
        " WHERE (c + v) % 10 = 0",
    ]


Progress = Callable[[str], None]


async def drop_secondary_indexes(connection: AsyncConnection) -> list[tuple[str, str]]:
    found = [tuple(row) for row in await connection.execute(_SECONDARY, {"tables": FILLED})]
    for name, _ in found:
        await connection.execute(text(f"DROP INDEX {name}"))
    return [(str(name), str(definition)) for name, definition in found]


async def fill(
    engine: AsyncEngine,
    groups: list[Users],
    vectors: str = "zero",
    batch_versions: int = 100_000,
    progress: Progress = print,
) -> float:
    """Write every group (as the tables' owner: `engine`), in transactions of about
    `batch_versions` memory versions, with progress; rebuild the indexes, VACUUM ANALYZE.
    The seconds it took."""
    if vectors not in ("zero", "random"):
        raise ValueError("vectors is 'zero' or 'random'")
    started = time.perf_counter()
    total = sum(group.memory_versions for group in groups)
    async with engine.begin() as connection:
        await connection.execute(
            text("INSERT INTO tenants (id, name) VALUES (:id, :name) ON CONFLICT DO NOTHING"),
            [{"id": t, "name": f"synthetic-{t}"} for t in {g.tenant_id for g in groups}],
        )
        indexes = await drop_secondary_indexes(connection)
    written = 0
    statements = [
        text(sql).bindparams(
            *(bindparam(name, type_=Integer) for name in _INTEGERS if f":{name}" in sql)
        )
        for sql in _statements(vectors)
    ]
    for group in groups:
        per_batch = max(1, batch_versions // max(1, group.chains * group.versions))
        for first in range(group.first, group.first + group.users, per_batch):
            users = min(per_batch, group.first + group.users - first)
            params = {
                "tag": f"{group.tenant_id}:{group.prefix}",
                "prefix": group.prefix,
                "first": first,
                "users": users,
                "chains": group.chains,
                "versions": group.versions,
                "messages": group.messages,
                "days": group.days,
                "deleted_every": group.deleted_every,
            }
            async with engine.begin() as connection:
                await connection.execute(_SET_TENANT, {"t": str(group.tenant_id)})
                for statement in statements:
                    names = statement.compile().params
                    await connection.execute(
                        statement, {k: v for k, v in params.items() if k in names}
                    )
            written += users * group.chains * group.versions
            progress(
                f"  {written:,} of {total:,} memory versions written"
                f" ({time.perf_counter() - started:.0f} s)"
            )
    async with engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.execute(text("SET maintenance_work_mem = '512MB'"))
        for name, definition in indexes:
            index_started = time.perf_counter()
            await connection.execute(text(definition))
            progress(f"  index {name} built ({time.perf_counter() - index_started:.1f} s)")
        for table in FILLED:
            await connection.execute(text(f"VACUUM ANALYZE {table}"))
    elapsed = time.perf_counter() - started
    progress(f"  filled in {elapsed:.0f} s")
    return elapsed
