"""job runs: how many times a worker started the job. A job is failed as interrupted
after max_attempts runs, not claims: an attempt claimed but never started (handed back
at a drain, at a restart, or lost with a Dask scheduler) no longer spends one (issue 39).

Revision ID: 0012
Revises: 0011
"""
from alembic import op
import sqlalchemy as sa

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("runs", sa.Integer(), nullable=False, server_default="0"))
    # a job claimed before this column: its attempts ran as far as anyone knows
    op.execute("UPDATE jobs SET runs = attempts WHERE state = 'running'")


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("runs")
