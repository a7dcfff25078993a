"""verifications: a deployment activated with `verify` has its board measure the plan's
candidates before serving it; the order, the board's figures and the outcome live here,
one row per (deployment, revision) verified.

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
    op.create_table(
        "verifications",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("deployment_id", sa.String(length=40), sa.ForeignKey("deployments.id"), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("plan_id", sa.String(length=40), sa.ForeignKey("plans.id"), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("order_json", sa.Text(), nullable=False),
        sa.Column("result_json", sa.Text(), nullable=True),
        sa.Column("verified_plan_id", sa.String(length=40), sa.ForeignKey("plans.id"), nullable=True),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("deployment_id", "revision"),
    )
    op.create_index("ix_verifications_deployment_id", "verifications", ["deployment_id"])


def downgrade() -> None:
    op.drop_index("ix_verifications_deployment_id", table_name="verifications")
    op.drop_table("verifications")
