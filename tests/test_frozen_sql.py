"""Released SQL never changes. Migrations read sql/ at upgrade time, so an edit to a released
file makes a database upgraded before it and one created after it differ, silently (`alembic
check` compares tables, not function bodies). A new definition is a new file (name_vN.sql) and
a new revision that installs it (0015_frozen_sql installs bitemporal_v2.sql).

Each file's checksum is recorded here when its revision is released; a file in sql/ that is not
recorded fails too, so a new one is frozen deliberately, with the revision that reads it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from app.db.sqlscript import SQL_DIR

ROOT = Path(__file__).resolve().parents[1]
# file -> (sha256 of its released text, the revision that first read it)
RELEASED = {
    "analyst_views_v1.sql": (
        "fe4c4b49f38682a4331a0ce16c74e1daf0f572d7250623349ea5c5e64266c154",
        "0002_analyst_views",
    ),
    "analyst_views_v1_drop.sql": (
        "7bd3ae859d1247a5437ff1e8f97445d0d55dda7eb80d2a15a9e0c98836eb303f",
        "0002_analyst_views",
    ),
    "bitemporal_v1.sql": (
        "535776b5b20d21c4118090a1d8a66e5001e4054ee151d651d1b7f80dc34b3755",
        "0009_bitemporal_history",
    ),
    "bitemporal_v1_drop.sql": (
        "3b4e0330bbf26feb4ceb62a6c0602f50ce41c36502345668eb4398fc4c62b865",
        "0009_bitemporal_history",
    ),
    "bitemporal_v2.sql": (
        "06d3719e51f2c0519617f4927a72e48d2456be3bafd37e28ba412c9aee3b6bb7",
        "0015_frozen_sql",
    ),
    "analyst_views_v2.sql": (
        "5ec33e642ab4693f30a65c9c23d08eb94f8085f6bc8c9538807fd8f85cb1bbbf",
        "0016_reader_roles",
    ),
    "analyst_views_v2_drop.sql": (
        "dec33865e26d4b04d755f20b79eb426da8d372438b8d8edade1ec12f350f18d8",
        "0016_reader_roles",
    ),
    "bitemporal_v3.sql": (
        "ab3b702661d6328ba64248cbe211a3aa37a22dec6d70de4495ef799d93c4b175",
        "0016_reader_roles",
    ),
    "reader_roles_v1.sql": (
        "4993b74efedf0e3ad0d3a4aac3a3dc2a3ff53d71a7d76828a7934a77138749f5",
        "0016_reader_roles",
    ),
    "reader_roles_v1_drop.sql": (
        "5c8f958846d091007ee1dce23e495cdcc00a8b924cda1da863a7a978387bdc97",
        "0016_reader_roles",
    ),
    "table_comments_v1.sql": (
        "15e9ab402e857450801fa5eb8e417071696b98042dde672e0c2be9067f222072",
        "0016_reader_roles",
    ),
    "memory_expiry_v1.sql": (
        "4e8838c754606e95996475c416a3df6a2de15520d89dd309b46758142196cd7f",
        "0017_memory_expiry",
    ),
    "memory_expiry_v1_drop.sql": (
        "5d6ea025e9206fc94443c3f7b9337567814e9642871034ec36327c6bbe10775a",
        "0017_memory_expiry",
    ),
    "scope_erasures_v1.sql": (
        "5f949a6e50f925ca107375bea022eed3221b646989fdb68204003b68b153976f",
        "0019_scope_erasures",
    ),
    "scope_erasures_v1_drop.sql": (
        "8a76dd8f089d6d0f224f5ba74b7b5f86289542ec54dd66feff6f72a8375f03de",
        "0019_scope_erasures",
    ),
    "sentence_vectors_v1.sql": (
        "71c9fe56b5425dc0cbb06ccf2c6ffa9cf5130e1b32698aef33508f6ce02426ac",
        "0021_sentence_vectors",
    ),
    "batch_jobs_v1.sql": (
        "71444e0a717e3a0053e5febdcda8e6fe1066bad6d8917995c9b01eb3580c2d15",
        "0022_batch_jobs",
    ),
    "batch_jobs_v1_drop.sql": (
        "f8d6f2e64d3e1185dc88a1c83859931c8dd5a6748036b927d42c4f6abd811809",
        "0022_batch_jobs",
    ),
    "database_privileges_v1.sql": (
        "b19ac54e45714d532e49d133e8491a2b73f3b6b2f96390daa3729c10ee224c3b",
        "0023_path_proof",
    ),
    "path_proof_v1.sql": (
        "a78716b2bc03afe9d782e4917aa813be4cae19e69b6c47c4f2a4d2d85130a5ac",
        "0023_path_proof",
    ),
    "path_proof_v1_drop.sql": (
        "9429b0074d49e0ec24591e9316f671b78ecda8e3621b3e17368bde2b3fc716b5",
        "0023_path_proof",
    ),
}


@pytest.mark.parametrize("name", sorted(RELEASED))
def test_a_released_sql_file_keeps_its_released_text(name: str) -> None:
    checksum, revision = RELEASED[name]
    actual = hashlib.sha256((SQL_DIR / name).read_bytes()).hexdigest()
    assert actual == checksum, (
        f"sql/{name} was released with {revision} and must not change: put the new definition "
        "in a new file (the next _vN) installed by a new revision"
    )


def test_every_sql_file_is_recorded_and_read_by_its_revision() -> None:
    assert {path.name for path in SQL_DIR.glob("*.sql")} == set(RELEASED)
    revisions = {path.read_text(): path for path in (ROOT / "migrations" / "versions").glob("*.py")}
    for name, (_, revision) in RELEASED.items():
        readers = [
            path
            for source, path in revisions.items()
            if f'"{name}"' in source and f'revision: str = "{revision}"' in source
        ]
        assert readers, f"{revision} does not read sql/{name}"
