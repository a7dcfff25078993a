"""bundles: a plan cut into per-slice model files with a manifest, for native executors
(GET /v1/plans/{id}/bundle); files stored once by sha256.

Revision ID: 0013
Revises: 0012
"""
from alembic import op
import sqlalchemy as sa

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bundles",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("plan_id", sa.String(length=40), sa.ForeignKey("plans.id"), nullable=False),
        sa.Column("manifest", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_bundles_plan_id", "bundles", ["plan_id"])
    op.create_index("ix_bundles_created_at", "bundles", ["created_at"])
    op.create_table(
        "bundle_files",
        sa.Column("sha256", sa.String(length=64), primary_key=True),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("bundle_files")
    op.drop_index("ix_bundles_created_at", table_name="bundles")
    op.drop_index("ix_bundles_plan_id", table_name="bundles")
    op.drop_table("bundles")
