"""schedule jobs and the schedules they make: jobs get a kind (existing rows are plan
jobs), a schedule_id, and a nullable profile_id (a schedule names one profile per app,
in its request); a schedules table holds the Schedule documents

Revision ID: 0003
Revises: 0002
"""
from alembic import op
import sqlalchemy as sa

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("job_id", sa.String(length=40), nullable=True),
        sa.Column("platform_id", sa.String(length=64), nullable=False),
        sa.Column("profile_ids", sa.Text(), nullable=False),
        sa.Column("solver", sa.String(length=64), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("front_size", sa.Integer(), nullable=False),
        sa.Column("schedulable", sa.Boolean(), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["platform_id"], ["documents.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("schedules") as batch:
        batch.create_index(batch.f("ix_schedules_created_at"), ["created_at"], unique=False)
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("kind", sa.String(length=16), nullable=False, server_default="plan"))
        batch.add_column(sa.Column("schedule_id", sa.String(length=40), nullable=True))
        batch.alter_column("profile_id", existing_type=sa.String(length=64), nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM jobs WHERE kind <> 'plan'")
    with op.batch_alter_table("jobs") as batch:
        batch.alter_column("profile_id", existing_type=sa.String(length=64), nullable=False)
        batch.drop_column("schedule_id")
        batch.drop_column("kind")
    with op.batch_alter_table("schedules") as batch:
        batch.drop_index(batch.f("ix_schedules_created_at"))
    op.drop_table("schedules")
