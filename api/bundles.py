"""Deployment bundles in the service: `POST /v1/plans/{id}/bundle` cuts a stored plan and
an uploaded model into per-slice files with a manifest (executor/bundle.py) on a plan
worker (the model's parse and slicing hold the GIL: never on the event loop), and stores
them content-addressed; `GET /v1/plans/{id}/bundle` serves the newest manifest (ETag =
its sha256) and `GET .../bundle/files/{sha256}` each file it names, to the pipeline or
to an executor token bound to a deployment that runs or ran the plan."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field
from sqlalchemy import select

from api.auth import Principal
from api.contexts import ServiceContext, WorkerContext
from api.problems import ApiError, invalid
from api.rows import BundleFileRow, BundleRow, DeploymentEventRow, DeploymentRow, PlanRow
from planner.core.errors import Issue


MAX_DEVICES = 64


class BundleInfo(BaseModel):
    id: str = Field(description="sha256 of the manifest: the bundle's ETag")
    plan_id: str
    created: bool
    slices: int
    bytes: int = Field(description="All slice files together")


def build(planner: WorkerContext, plan_id: str, model: bytes, devices: list[str], weights: str) -> dict:
    """On a plan worker: the bundle made and stored; BundleInfo's fields."""
    from executor.bundle import BundleError, make_bundle, manifest_bytes, sha256_hex
    from executor.runtime import DeviceSpecError

    with planner.db.session() as s:
        body = s.scalar(select(PlanRow.body).where(PlanRow.id == plan_id))
    if body is None:
        raise ApiError(404, f"no plan with id {plan_id}")
    with tempfile.TemporaryDirectory(prefix="bundle-") as tmp:
        try:
            manifest = make_bundle({"id": plan_id, "plan": json.loads(body)}, model, devices, tmp, weights=weights)
        except DeviceSpecError as exc:
            raise invalid("query.device", str(exc)) from None
        except BundleError as exc:  # "field: reason"; the request's own names for model and devices
            field, _, reason = str(exc).partition(": ")
            field = {"model": "<body>", "devices": "query.device"}.get(field, field)
            raise invalid(field, reason or str(exc)) from None
        files = {x["sha256"]: (Path(tmp) / x["file"]).read_bytes() for x in manifest["slices"]}
    raw = manifest_bytes(manifest)
    bundle_id = sha256_hex(raw)
    created = _store(planner, bundle_id, plan_id, raw, files)
    return {"id": bundle_id, "plan_id": plan_id, "created": created, "slices": len(manifest["slices"]),
            "bytes": sum(len(d) for d in files.values())}


def _store(planner: WorkerContext, bundle_id: str, plan_id: str, manifest: bytes, files: dict[str, bytes]) -> bool:
    """Store the bundle and the files not stored yet; whether it is new. A concurrent store
    of the same content (two replicas, two requests) loses the race harmlessly: retried once."""
    from sqlalchemy.exc import IntegrityError

    for attempt in range(2):
        try:
            with planner.db.session() as s:
                created = s.get(BundleRow, bundle_id) is None
                for sha, data in files.items():
                    if s.get(BundleFileRow, sha) is None:
                        s.add(BundleFileRow(sha256=sha, size_bytes=len(data), body=data))
                if created:
                    s.add(BundleRow(id=bundle_id, plan_id=plan_id, manifest=manifest.decode()))
                s.commit()
                return created
        except IntegrityError:
            if attempt:
                raise
    raise AssertionError("unreachable")


def _may_read(svc: ServiceContext, plan_id: str, who: Principal) -> None:
    """The pipeline reads every bundle; an executor token those of plans its deployments run or ran."""
    if who.has("pipeline"):
        return
    if "executor" in who.scopes and who.deployments:
        with svc.db.session() as s:
            active = s.scalar(select(DeploymentRow.id).where(DeploymentRow.id.in_(who.deployments),
                                                             DeploymentRow.active_plan_id == plan_id).limit(1))
            ran = active or s.scalar(select(DeploymentEventRow.id).where(
                DeploymentEventRow.deployment_id.in_(who.deployments), DeploymentEventRow.plan_id == plan_id).limit(1))
        if ran:
            return
    raise ApiError(403, "this token may not read the plan's bundle: an executor token reads the bundles of plans its "
                        "deployments run or ran", errors=[Issue("plan_id", "not a plan of this token's deployments")])


def manifest(svc: ServiceContext, plan_id: str, who: Principal) -> tuple[str, bytes]:
    """(bundle id, manifest bytes) of the plan's newest bundle."""
    _may_read(svc, plan_id, who)
    with svc.db.session() as s:
        row = s.scalars(select(BundleRow).where(BundleRow.plan_id == plan_id)
                        .order_by(BundleRow.created_at.desc(), BundleRow.id).limit(1)).first()
        if row is None:
            raise ApiError(404, f"plan {plan_id} has no bundle yet (POST /v1/plans/{plan_id}/bundle, or planner bundle)")
        return row.id, row.manifest.encode()


def file(svc: ServiceContext, plan_id: str, sha256: str, who: Principal) -> bytes:
    """A slice file named by one of the plan's bundles (never any stored blob by hash)."""
    _may_read(svc, plan_id, who)
    with svc.db.session() as s:
        manifests = s.scalars(select(BundleRow.manifest).where(BundleRow.plan_id == plan_id)).all()
        if not any(x.get("sha256") == sha256 for m in manifests for x in json.loads(m)["slices"]):
            raise ApiError(404, f"no file {sha256} in the bundles of plan {plan_id}")
        data = s.scalar(select(BundleFileRow.body).where(BundleFileRow.sha256 == sha256))
    if data is None:
        raise ApiError(404, f"no file {sha256} in the bundles of plan {plan_id}")
    return bytes(data)
