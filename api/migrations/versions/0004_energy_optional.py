"""plans.energy_mj nullable: a plan made from a time-only profile (no power source on
the board, `energy_source`) has no energy, and says so instead of inventing one

Revision ID: 0004
Revises: 0003
"""
from alembic import op
import sqlalchemy as sa

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("plans") as batch:
        batch.alter_column("energy_mj", existing_type=sa.Float(), nullable=True)


def downgrade() -> None:
    with op.batch_alter_table("plans") as batch:
        batch.alter_column("energy_mj", existing_type=sa.Float(), nullable=False)
