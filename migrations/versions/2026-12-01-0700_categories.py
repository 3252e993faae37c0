"""Categories as a table (custom lists per deployment), the sender's UTC offset on messages,
and what the audit trail was missing (event time, LLM gate, prompt version).

- `categories` (name, description, examples) seeded with the paper's 15; memories.category
  becomes a foreign key to it instead of a CHECK over a fixed list.
- messages.utc_offset_minutes: relative dates resolve in the sender's offset.
- ingest_decisions.event_time, llm_gate, gate_similarity, prompt_version.

Revision ID: 0012_categories
Revises: 0011_erase_tombstones
Create Date: 2026-12-01 07:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from app.db.migration_safety import exists, refuse_data_loss, validate_constraint

revision: str = "0012_categories"
down_revision: str | None = "0011_erase_tombstones"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The paper's 15, frozen here as they were when this revision was written.
SEED = {
    "personal_details": "Name, age, birthday, where the person lives, nationality, identity.",
    "professional": "Work and career: job, employer, role, colleagues, projects at work.",
    "health": "Illness, medical conditions, injuries, medication, doctors, fitness, sleep.",
    "relationships": "Partner, spouse, friends, children, parents, siblings, dating.",
    "preferences": "Likes and dislikes, favourite things, tastes.",
    "hobbies": "Sports, games, music, painting, reading, crafts, pastimes.",
    "goals": "Ambitions, plans, things the person wants to achieve.",
    "financial": "Income, salary, savings, debt, budget, investments, purchases.",
    "educational": "School, university, courses, degrees, studying, exams.",
    "travel": "Trips, vacations, flights, visiting cities and countries.",
    "emotional": "Feelings: happy, sad, stressed, anxious, excited, lonely, proud.",
    "technical_skills": "Programming languages, software, tools, technologies the person knows.",
    "dietary": "Vegetarian, vegan, allergies, food restrictions, eating habits.",
    "behavioral_patterns": "Habits and routines, daily schedule, recurring behaviour.",
    "communication_style": "How the person likes to be addressed: tone, language, brevity.",
}
OLD_CHECK = "category IN (" + ", ".join(f"'{name}'" for name in SEED) + ")"


def upgrade() -> None:
    # Catalog changes and the 15 seed rows, in one transaction: the new constraints are added
    # NOT VALID (their locks last a catalog change, no scan), so all of it commits or none of
    # it, and a rerun skips it once it has.
    if not exists("to_regclass('categories') IS NOT NULL"):
        _categories_and_columns()
    # Each existing row is checked apart from that transaction, in one of its own: VALIDATE
    # holds only a SHARE UPDATE EXCLUSIVE lock, so reads and writes go on meanwhile. (Until
    # 2026-12 this revision validated inside the transaction that dropped the old CHECK, under
    # its ACCESS EXCLUSIVE lock.)
    validate_constraint("memories", "memories_category_fkey")
    validate_constraint("ingest_decisions", "ingest_decisions_llm_gate_check")


def _categories_and_columns() -> None:
    categories = op.create_table(
        "categories",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column(
            "examples",
            postgresql.ARRAY(sa.Text()),
            server_default=sa.text("'{}'::text[]"),
            nullable=False,
        ),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint(
            "name ~ '^[a-z][a-z0-9_]{0,62}$'", name=op.f("categories_name_format_check")
        ),
        sa.PrimaryKeyConstraint("name", name=op.f("categories_pkey")),
    )
    op.bulk_insert(categories, [{"name": n, "description": d} for n, d in SEED.items()])
    op.drop_constraint(op.f("memories_category_check"), "memories", type_="check")
    op.create_foreign_key(
        op.f("memories_category_fkey"),
        "memories",
        "categories",
        ["category"],
        ["name"],
        onupdate="CASCADE",
        postgresql_not_valid=True,
    )
    # A deployment-wide list (not per tenant): the service's roles read it; its owner edits it.
    op.execute("GRANT SELECT ON categories TO cognis_rw")
    op.add_column(
        "ingest_decisions", sa.Column("event_time", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column("ingest_decisions", sa.Column("llm_gate", sa.Text(), nullable=True))
    op.add_column("ingest_decisions", sa.Column("gate_similarity", sa.Float(), nullable=True))
    op.add_column("ingest_decisions", sa.Column("prompt_version", sa.Text(), nullable=True))
    op.create_check_constraint(
        op.f("ingest_decisions_llm_gate_check"),
        "ingest_decisions",
        "llm_gate IS NULL OR llm_gate IN ('call', 'skip')",
        postgresql_not_valid=True,
    )
    # messages last: writers of ingest_decisions (and memories) hold their table, then check
    # the foreign key in messages; taking messages before them could deadlock with them.
    op.add_column("messages", sa.Column("utc_offset_minutes", sa.SmallInteger(), nullable=True))


def downgrade() -> None:
    refuse_data_loss(
        "the categories a deployment added, the senders' UTC offsets and the audit trail's "
        "event times, LLM gate verdicts and prompt versions"
    )
    op.drop_constraint(op.f("ingest_decisions_llm_gate_check"), "ingest_decisions", type_="check")
    for column in ("prompt_version", "gate_similarity", "llm_gate", "event_time"):
        op.drop_column("ingest_decisions", column)
    op.drop_column("messages", "utc_offset_minutes")
    op.drop_constraint(op.f("memories_category_fkey"), "memories", type_="foreignkey")
    # NOT VALID: memories filed under a deployment's own category stay as they are (nothing is
    # relabelled or lost); every new or changed row must be one of the 15 again.
    op.execute(
        f"ALTER TABLE memories ADD CONSTRAINT memories_category_check CHECK ({OLD_CHECK}) NOT VALID"
    )
    op.drop_table("categories")
