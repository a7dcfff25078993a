"""plans and jobs remember the key of the request that made them (content-addressed
reuse: the same platform, profile and request get the stored plan back)

Revision ID: 0002
Revises: 0001
"""
from alembic import op
import sqlalchemy as sa

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("plans", "jobs"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("request_key", sa.String(length=64), nullable=True))
            batch.create_index(f"ix_{table}_request_key", ["request_key"], unique=False)


def downgrade() -> None:
    for table in ("plans", "jobs"):
        with op.batch_alter_table(table) as batch:
            batch.drop_index(f"ix_{table}_request_key")
            batch.drop_column("request_key")
