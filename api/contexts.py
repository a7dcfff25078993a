"""What the work a plan worker or the service hands out reads of them.

api/pages.py, api/verification.py and api/bundles.py are run by a plan worker (its
`api.fastplans.Planner`) or by the service (`api.service.Service`), which they take as
their first argument. They name the members they use here, below both, so that the
worker and the service import the work and the work never imports them back (issue 41:
five modules stood in one import circle through those annotations).
"""

from __future__ import annotations

from typing import Any, Protocol

from api.db import Database
from api.lru import LRU
from api.rows import DeploymentRow
from api.settings import Limits


class WorkerContext(Protocol):
    """A plan worker's Planner: its database, limits and parsed-document cache."""

    db: Database
    limits: Limits
    docs: LRU

    def parsed(self, kind: str, doc_id: str, path: str) -> Any: ...

    def document(self, kind: str, body: bytes) -> tuple[dict, bool]: ...

    def same_lineage(self, a: str, b: str) -> bool: ...


class WorkerCalls(Protocol):
    """The service's plan workers (api.fastplans.PlanWorkers): a named call in a worker."""

    async def call(self, name: str, *args: Any) -> Any: ...


class ServiceContext(Protocol):
    """The service, as verification and bundles read it: its database, its plan workers,
    and making a plan a deployment's active one."""

    db: Database
    plan_workers: WorkerCalls

    def set_active(self, dep: DeploymentRow, plan_id: str | None, action: str, actor: str,
                   profile_id: str | None = None, entry: tuple[str, int] | None = None,
                   expect_revision: int | None = None, verify_order: str | None = None) -> DeploymentRow: ...
