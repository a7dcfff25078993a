"""jobs remember the token that queued them (token_id), so a token's queued work can
be capped and the claimer can take jobs fairly across tokens (issue 21, finding 9).
Jobs of older versions have none (NULL): they count as one more token.

Revision ID: 0009
Revises: 0008
"""
from alembic import op
import sqlalchemy as sa

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("token_id", sa.String(length=40), nullable=True))
    op.create_index("ix_jobs_token_state", "jobs", ["token_id", "state"])


def downgrade() -> None:
    op.drop_index("ix_jobs_token_state", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("token_id")
