"""telemetry batches: what on-device agents measured per deployment and plan (unique
per deployment and batch id, so a retried POST is stored once)

Revision ID: 0006
Revises: 0005
"""
from alembic import op
import sqlalchemy as sa

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "telemetry_batches",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("deployment_id", sa.String(length=40), nullable=False),
        sa.Column("batch_id", sa.String(length=64), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("agent", sa.String(length=200), nullable=False),
        sa.Column("token_id", sa.String(length=40), nullable=False),
        sa.Column("plan_id", sa.String(length=40), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=True),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("errors", sa.Integer(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["deployment_id"], ["deployments.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("deployment_id", "batch_id", name="uq_telemetry_batch"),
    )
    with op.batch_alter_table("telemetry_batches") as batch:
        batch.create_index(batch.f("ix_telemetry_batches_deployment_id"), ["deployment_id"], unique=False)
        batch.create_index(batch.f("ix_telemetry_batches_plan_id"), ["plan_id"], unique=False)
        batch.create_index(batch.f("ix_telemetry_batches_received_at"), ["received_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("telemetry_batches") as batch:
        batch.drop_index(batch.f("ix_telemetry_batches_received_at"))
        batch.drop_index(batch.f("ix_telemetry_batches_plan_id"))
        batch.drop_index(batch.f("ix_telemetry_batches_deployment_id"))
    op.drop_table("telemetry_batches")
