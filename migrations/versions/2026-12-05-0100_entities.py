"""Entities (issue 43): the named things of a user's memories, and which memory versions name
them.

`entities` holds, per tenant and user, one row per person, place, organisation, product,
title, event, group or language that the user's memories name (app/ml/ner.py finds them): its
name (the longest form seen), type, the other forms that are the same thing (aliases: "Mel"
for "Melanie", docs/entities.md), and when a memory first and last named it.
`memory_entities` links a memory version to each entity it names, with the form written;
deleting the version (an erase, the expiry reaper) deletes its links. `memories.entities_at`
is when the entity worker read a version (NULL: not yet); `memories_entities_pending_idx`, a
partial index of the current versions still NULL, is the worker's queue (every existing row
is in it after the upgrade, so the worker reads the memories written before it too).

Row-level security on both tables as on every tenant table (0007_tenants, 0023_path_proof):
the tenant's own rows, the background role across tenants (the worker), a bound analyst's
tenant read-only, the auditor read-only; grants and comments like the others. Erasing the
user deletes both (app/memories/user_lock.py).

New tables and a nullable column without a default: catalog changes, no rewrite; the index is
built concurrently. Rerunnable (IF NOT EXISTS; policies dropped first). Entities are derived
from the memories and are found again by the worker, so the downgrade drops them without
refusing.

Revision ID: 0039_entities
Revises: 0038_batch_job_traceparent
Create Date: 2026-12-05 01:00:00
"""

from collections.abc import Sequence

from alembic import op

from app.db.migration_safety import create_index_concurrently, drop_index_concurrently

revision: str = "0039_entities"
down_revision: str | None = "0038_batch_job_traceparent"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("entities", "memory_entities")

COMMENTS = {
    "entities": {
        None: "The named things (people, places, organisations, products, titles, events, "
        "groups, languages) of a user's memories, found by the entity worker's NER model "
        "(docs/entities.md). Deleted with the user by an erase of the whole user.",
        "tenant_id": "The tenant the row belongs to (tenants.id).",
        "id": "The entity's id, as the API shows it.",
        "user_id": "The user whose memories name it, unique within its tenant only.",
        "name": "The entity's name: the longest form of it seen in the user's memories.",
        "type": "person, place, organisation, product, title, event, group or language.",
        "key": "lower(name): unique per user and type.",
        "aliases": "Other forms of the name that are the same thing (a first name or its "
        "short form: Mel for Melanie), as written.",
        "first_seen": "When the first memory that names it was written.",
        "last_seen": "When the latest memory that names it was written.",
    },
    "memory_entities": {
        None: "Which memory versions name which entities: one row per version and entity.",
        "tenant_id": "The tenant the row belongs to (tenants.id).",
        "memory_id": "The memory version (memories.id); deleting it deletes the row.",
        "entity_id": "The entity it names (entities.id).",
        "user_id": "The user of the memory and the entity.",
        "mention": "The form of the name the memory uses, as written.",
    },
}


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS entities (
            tenant_id uuid NOT NULL DEFAULT cognis_tenant(),
            id uuid NOT NULL DEFAULT gen_random_uuid(),
            user_id text NOT NULL,
            name text NOT NULL,
            type text NOT NULL,
            key text NOT NULL,
            aliases text[] NOT NULL DEFAULT '{}',
            first_seen timestamptz NOT NULL DEFAULT now(),
            last_seen timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT entities_pkey PRIMARY KEY (id),
            CONSTRAINT entities_tenant_id_user_id_type_key_key UNIQUE (tenant_id, user_id, type, key),
            CONSTRAINT entities_type_check CHECK (type IN ('person', 'place', 'organisation',
                'product', 'title', 'event', 'group', 'language'))
        )
        """
    )
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS memory_entities (
            tenant_id uuid NOT NULL DEFAULT cognis_tenant(),
            memory_id uuid NOT NULL,
            entity_id uuid NOT NULL,
            user_id text NOT NULL,
            mention text NOT NULL,
            CONSTRAINT memory_entities_pkey PRIMARY KEY (memory_id, entity_id),
            CONSTRAINT memory_entities_memory_id_fkey FOREIGN KEY (memory_id)
                REFERENCES memories (id) ON DELETE CASCADE,
            CONSTRAINT memory_entities_entity_id_fkey FOREIGN KEY (entity_id)
                REFERENCES entities (id) ON DELETE CASCADE
        )
        """
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS memory_entities_entity_id_idx ON memory_entities (entity_id)"
    )
    op.execute(
        "CREATE INDEX IF NOT EXISTS memory_entities_user_id_idx ON memory_entities (user_id)"
    )
    op.execute("CREATE INDEX IF NOT EXISTS entities_user_id_idx ON entities (user_id)")
    op.execute("ALTER TABLE memories ADD COLUMN IF NOT EXISTS entities_at timestamptz")
    op.execute(
        "COMMENT ON COLUMN memories.entities_at IS 'When the entity worker read this version "
        "for the entities it names (memory_entities). NULL: not yet.'"
    )
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        policies = {
            "tenant_isolation": "USING (tenant_id = cognis_tenant()) "
            "WITH CHECK (tenant_id = cognis_tenant())",
            "background_claims": "TO cognis_background USING (cognis_tenant() IS NULL) "
            "WITH CHECK (cognis_tenant() IS NULL)",
            "analyst_read": "FOR SELECT TO cognis_analyst "
            "USING (tenant_id = (SELECT public.cognis_analyst_tenant()))",
            "analyst_bound": "AS RESTRICTIVE TO cognis_analyst "
            "USING (tenant_id = (SELECT public.cognis_analyst_tenant())) WITH CHECK (false)",
            "auditor_read": "FOR SELECT TO cognis_auditor USING (true)",
        }
        for name, rule in policies.items():
            op.execute(f"DROP POLICY IF EXISTS {table}_{name} ON {table}")
            op.execute(f"CREATE POLICY {table}_{name} ON {table} {rule}")
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO cognis_rw")
        op.execute(f"GRANT SELECT ON {table} TO cognis_analyst, cognis_auditor")
        for column, comment in COMMENTS[table].items():
            target = f"TABLE {table}" if column is None else f"COLUMN {table}.{column}"
            op.execute(f"COMMENT ON {target} IS {_quoted(comment)}")
    create_index_concurrently(
        "memories_entities_pending_idx", "memories", "(id) WHERE is_current AND entities_at IS NULL"
    )


def downgrade() -> None:
    drop_index_concurrently("memories_entities_pending_idx")
    op.execute("ALTER TABLE memories DROP COLUMN IF EXISTS entities_at")
    for table in reversed(TABLES):
        op.execute(f"DROP TABLE IF EXISTS {table}")
