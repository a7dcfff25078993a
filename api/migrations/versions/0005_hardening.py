"""issue 12: rows older versions stored that the service cannot answer are repaired and
flagged; executor tokens bind to deployment ids, not names; deployment names may not
take the id prefix; in-flight idempotency keys carry a lease (owner + expiry), so a
key whose request died with its server is released

- jobs and plans whose stored request does not read back (options nested 240 deep,
  NaN stored as null in a place that needs a number, ...) keep their other fields; their
  options become {} and the job says so in its message (an active job is failed: its
  request cannot be run as it was accepted);
- a token bound to a deployment *name* is bound to that deployment's id;
- a deployment named like an id (dep_...) is renamed named-dep_... (the rename is logged).

Revision ID: 0005
Revises: 0004
"""
import datetime as dt
import json
import logging

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")
ID_PREFIX = "dep_"


def _unreadable(model, text: str) -> str | None:  # noqa: ANN001
    """Why `text` does not read back as `model` (None when it does)."""
    from pydantic import ValidationError

    try:
        model.model_validate_json(text)
    except (ValidationError, ValueError) as exc:
        return str(exc).splitlines()[0][:200] if not isinstance(exc, ValidationError) else \
            f"{'.'.join(str(p) for p in exc.errors()[0].get('loc', ()))}: {exc.errors()[0].get('msg')}"[:200]
    return None


def _without_options(text: str) -> str:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    data["options"] = {}
    return json.dumps(data)


def _repair_requests(conn) -> None:  # noqa: ANN001
    from api.schemas import ScheduleSubmission
    from planner.core.schema import PlanRequest

    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    jobs = sa.table("jobs", sa.column("id"), sa.column("kind"), sa.column("request"), sa.column("state"),
                    sa.column("message"), sa.column("error"), sa.column("finished_at"))
    for row in conn.execute(sa.select(jobs.c.id, jobs.c.kind, jobs.c.request, jobs.c.state, jobs.c.message)).all():
        model = ScheduleSubmission if row.kind == "schedule" else PlanRequest
        why = _unreadable(model, row.request)
        if why is None:
            continue
        note = f"repaired by migration 0005: the stored request did not read back ({why}); its options were dropped"
        values = {"request": _without_options(row.request), "message": f"{row.message} [{note}]"[:2000]}
        if row.state in ("queued", "running"):
            values.update(state="failed", finished_at=now, error=json.dumps({
                "type": "/problems/unreadable-request", "title": "Unreadable request", "status": 422,
                "detail": f"request: {note}", "errors": [{"path": "request", "reason": note}]}))
        log.warning("job %s: %s", row.id, note)
        conn.execute(sa.update(jobs).where(jobs.c.id == row.id).values(**values))
    plans = sa.table("plans", sa.column("id"), sa.column("request"))
    for row in conn.execute(sa.select(plans.c.id, plans.c.request)).all():
        why = _unreadable(PlanRequest, row.request)
        if why is not None:
            log.warning("plan %s: stored request did not read back (%s); its options were dropped", row.id, why)
            conn.execute(sa.update(plans).where(plans.c.id == row.id).values(request=_without_options(row.request)))


def _bind_tokens_to_ids(conn) -> None:  # noqa: ANN001
    deps = sa.table("deployments", sa.column("id"), sa.column("name"))
    tokens = sa.table("tokens", sa.column("id"), sa.column("deployments"))
    by_name = {r.name: r.id for r in conn.execute(sa.select(deps.c.id, deps.c.name)).all()}
    ids = set(by_name.values())
    for dep_id, name in ((v, k) for k, v in list(by_name.items())):
        if name.startswith(ID_PREFIX):
            new, n = f"named-{name}", 1
            while new in by_name:
                n += 1
                new = f"named-{name}-{n}"
            log.warning("deployment %s: renamed '%s' -> '%s' (names may not look like ids)", dep_id, name, new)
            conn.execute(sa.update(deps).where(deps.c.id == dep_id).values(name=new[:200]))
            by_name[new] = dep_id
    for row in conn.execute(sa.select(tokens.c.id, tokens.c.deployments)).all():
        try:
            bound = json.loads(row.deployments or "[]")
        except ValueError:
            bound = []
        # an entry that is an id stays; a name becomes its id (names were resolved first
        # by the old lookup only when no id matched, so ids win here too)
        rebound = sorted({b if b in ids else by_name.get(b, b) for b in bound if isinstance(b, str)})
        if rebound != bound:
            conn.execute(sa.update(tokens).where(tokens.c.id == row.id).values(deployments=json.dumps(rebound)))


def upgrade() -> None:
    with op.batch_alter_table("idempotency_keys") as batch:
        batch.add_column(sa.Column("owner", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("lease_expires_at", sa.DateTime(), nullable=True))
    conn = op.get_bind()
    _repair_requests(conn)
    _bind_tokens_to_ids(conn)


def downgrade() -> None:
    with op.batch_alter_table("idempotency_keys") as batch:
        batch.drop_column("lease_expires_at")
        batch.drop_column("owner")
