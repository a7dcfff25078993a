"""job attempts get a lease: the replica that claimed the attempt (owner) and until
when its claim holds (lease_expires_at). A worker may record a result only while its
attempt is the current one; a replica that finds an expired lease claims the job
again as the next attempt. Running jobs of older versions have no lease (claimable).

Revision ID: 0007
Revises: 0006
"""
from alembic import op
import sqlalchemy as sa

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("owner", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("lease_expires_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("lease_expires_at")
        batch.drop_column("owner")
