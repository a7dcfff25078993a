"""deployments of multi-network schedules (issue 26): a deployment may name several
profiles (profile_ids, JSON list) and have a schedule entry active (active_schedule_id,
active_entry) instead of a plan; its history events name the plan or the entry; a
telemetry batch may be a schedule entry's (schedule_id, entry).

Revision ID: 0010
Revises: 0009
"""
from alembic import op
import sqlalchemy as sa

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deployments") as batch:
        batch.add_column(sa.Column("profile_ids", sa.Text(), nullable=True))
        batch.add_column(sa.Column("active_schedule_id", sa.String(length=40), nullable=True))
        batch.add_column(sa.Column("active_entry", sa.Integer(), nullable=True))
    with op.batch_alter_table("deployment_events") as batch:
        batch.alter_column("plan_id", existing_type=sa.String(length=40), nullable=True)
        batch.add_column(sa.Column("schedule_id", sa.String(length=40), nullable=True))
        batch.add_column(sa.Column("entry", sa.Integer(), nullable=True))
    with op.batch_alter_table("telemetry_batches") as batch:
        batch.add_column(sa.Column("schedule_id", sa.String(length=40), nullable=True))
        batch.add_column(sa.Column("entry", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("telemetry_batches") as batch:
        batch.drop_column("entry")
        batch.drop_column("schedule_id")
    with op.batch_alter_table("deployment_events") as batch:
        batch.drop_column("entry")
        batch.drop_column("schedule_id")
    with op.batch_alter_table("deployments") as batch:
        batch.drop_column("active_entry")
        batch.drop_column("active_schedule_id")
        batch.drop_column("profile_ids")
