"""POST /v1/profiles/{id}/refit: a corrected profile from a deployment's telemetry
(models/refit.py), stored as a new content-addressed document. Thin."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response
from pydantic import BaseModel, Field

from api import telemetry, views
from api.auth import Principal, require
from api.problems import invalid, responses
from api.routers.deps import service
from api.rows import DocumentRow
from api.schemas import DocumentInfo
from api.service import Service
from planner.core.errors import PlannerError
from planner.core.schema import Strict

router = APIRouter(prefix="/v1/profiles", tags=["documents"])
DocId = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$", description="sha256 content id")]


class RefitRequest(Strict):
    deployment: str = Field(min_length=1, max_length=200, description="Deployment (id or name) whose telemetry to use")
    plan_ids: list[Annotated[str, Field(max_length=40)]] | None = Field(None, max_length=100,
                                                                     description="Only these plans' telemetry")
    min_samples: int = Field(5, ge=1, le=1_000_000, description="Slices with fewer samples are not used")
    max_scale: float = Field(4.0, gt=1, le=1000, description="A slice's execution is scaled at most this much either way")
    batches: int = Field(1000, ge=1, le=20_000, description="Most recent telemetry batches read")


class RefitResult(BaseModel):
    profile: DocumentInfo
    slices: int
    measurements_changed: int
    samples_used: int = Field(description="Telemetry samples the refit stands on")
    samples_set_aside: int = Field(description="Samples left out as outliers (the report says of which plans, and why)")
    report: list[str]


@router.post("/{doc_id}/refit", status_code=201, response_model=RefitResult,
             summary="Refit a profile from measured slice latencies",
             description="Distributes each measured slice's measured/predicted execution ratio (median over samples, "
                         "bounded by max_scale) over its layers' measurements on that device and frequency. The result "
                         "is a new profile document (201; 200 when that exact document was stored already).",
             responses={200: {"model": RefitResult, "description": "The refit profile was already stored"},
                        **responses(401, 403, 404, 413, 422)})
async def refit_profile(doc_id: DocId, body: RefitRequest, response: Response,
                        svc: Service = Depends(service), who: Principal = Depends(require("pipeline"))):
    from models.refit import RefitOptions

    try:
        RefitOptions(body.min_samples, body.max_scale)
    except PlannerError as exc:
        raise invalid(exc.issues[0].path, exc.issues[0].reason) from None
    # the service checks access and reads the telemetry; a plan worker parses, refits and
    # stores (api.pages.refit), under its deadline and memory cap, off the event loop's GIL
    args = await telemetry.refit_args(svc, doc_id, body.deployment, who, body.batches, body.plan_ids)
    info, created, report = await svc.plan_workers.call("refit", doc_id, *args, body.min_samples, body.max_scale)
    row = DocumentRow(**info)
    response.status_code = 201 if created else 200
    response.headers["Location"] = f"/v1/profiles/{row.id}"
    return RefitResult(profile=views.document(row, created), **report)
