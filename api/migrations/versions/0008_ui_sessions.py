"""web UI sessions live in the database (the cookie carries a random session id, not the
API token): valid on every replica, ended everywhere by logout or the token's revocation.

Revision ID: 0008
Revises: 0007
"""
from alembic import op
import sqlalchemy as sa

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ui_sessions",
        sa.Column("id_sha256", sa.String(length=64), primary_key=True),
        sa.Column("token_id", sa.String(length=40), sa.ForeignKey("tokens.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_ui_sessions_token_id", "ui_sessions", ["token_id"])
    op.create_index("ix_ui_sessions_expires_at", "ui_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_table("ui_sessions")
