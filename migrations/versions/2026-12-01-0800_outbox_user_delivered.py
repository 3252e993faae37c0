"""Outbox: one user's delivered rows by delivery time (the index lag's unrefreshed events).

A delivered document is searchable only after the index's next refresh; a search counts the
user's rows delivered within the refresh window as pending. Without this index that count
would visit every row the user has kept (24 h of them), on every search.

Revision ID: 0013_outbox_user_delivered
Revises: 0012_categories
Create Date: 2026-12-01 08:00:00
"""

from collections.abc import Sequence

from app.db.migration_safety import create_index_concurrently, drop_index_concurrently

revision: str = "0013_outbox_user_delivered"
down_revision: str | None = "0012_categories"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    create_index_concurrently(
        "outbox_user_delivered_idx",
        "outbox",
        "(user_id, processed_at) WHERE processed_at IS NOT NULL",
    )


def downgrade() -> None:
    drop_index_concurrently("outbox_user_delivered_idx")
