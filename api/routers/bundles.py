"""Deployment bundles: a plan cut into per-slice model files with a manifest, for native
executors (api/bundles.py; executor/bundle.py makes them)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response

from api import bundles
from api.auth import Principal, require
from api.problems import ApiError, invalid, responses
from api.routers.deps import service
from api.service import Service
from planner.core.errors import Issue

router = APIRouter(prefix="/v1", tags=["plans"])  # not JsonRoute: the upload is the model's raw bytes
PIPELINE = Depends(require("pipeline"))
READER = Depends(require("pipeline", "executor"))
ResId = Annotated[str, Path(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_-]+$")]
Sha = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$", description="sha256 of the file, as the manifest names it")]
OCTETS = "application/octet-stream"


def _matches(if_none_match: str | None, etag: str) -> bool:
    return bool(if_none_match) and ("*" in if_none_match or etag in [t.strip().removeprefix("W/") for t in if_none_match.split(",")])


@router.post("/plans/{plan_id}/bundle", status_code=201, response_model=bundles.BundleInfo, summary="Make the plan's bundle",
             description="The body is the ONNX model the plan's profile was measured from (Content-Type: "
                         "application/octet-stream, up to PLANNER_MAX_BODY_BYTES); `device` gives each device id of "
                         "the plan its runtime settings. The plan is cut into one file per slice with a manifest "
                         "(slice order, tensor names, settings, predicted times, sha256 of every file), stored by "
                         "content: the same plan, model and settings give the same bundle (200).",
             openapi_extra={"requestBody": {"required": True, "content": {OCTETS: {"schema": {"type": "string",
                                                                                              "format": "binary"}}}}},
             responses={200: {"model": bundles.BundleInfo, "description": "Already stored (same manifest)"},
                        **responses(401, 403, 404, 413, 415, 422)})
async def make_bundle(plan_id: ResId, request: Request, response: Response,
                      device: list[str] = Query(..., min_length=1, max_length=bundles.MAX_DEVICES,
                                                description="ID=openvino[:DEVICE][,threads=N,affinity=CORES,precision=P,"
                                                            "PROPERTY=value], one per device id of the plan"),
                      weights: Literal["computed", "random"] = Query("computed", description="As given to planner profile"),
                      svc: Service = Depends(service), _: Principal = PIPELINE):
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != OCTETS:
        reason = f"send the ONNX model's bytes with Content-Type: {OCTETS} (got '{media or 'none'}')"
        raise ApiError(415, reason, errors=[Issue("header.content-type", reason)], title="Unsupported Media Type")
    bad = [d for d in device if len(d) > 1000]
    if bad:
        raise invalid("device", "a device spec is over 1000 characters")
    body = await request.body()
    if not body:
        raise invalid("<body>", "empty: send the ONNX model's bytes")
    info = await svc.plan_workers.call("bundle", plan_id, body, list(device), weights)
    response.status_code = 201 if info["created"] else 200
    response.headers["Location"] = f"/v1/plans/{plan_id}/bundle"
    response.headers["ETag"] = f'"{info["id"]}"'
    return info


@router.get("/plans/{plan_id}/bundle", summary="The plan's bundle manifest (executors)",
            description="The newest bundle of the plan: its manifest, whose sha256 is the ETag (`If-None-Match` "
                        "answers 304). Each slice file is at `.../bundle/files/{sha256}`. Executor tokens read the "
                        "bundles of plans their deployments run or ran.",
            responses={200: {"content": {"application/json": {}}}, 304: {"description": "Not modified"},
                       **responses(401, 403, 404, 422)})
def get_manifest(plan_id: ResId, if_none_match: str | None = Header(None, max_length=1000),
                 svc: Service = Depends(service), who: Principal = READER):
    bundle_id, body = bundles.manifest(svc, plan_id, who)
    etag = f'"{bundle_id}"'
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if _matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


@router.get("/plans/{plan_id}/bundle/files/{sha256}", summary="One slice file of the plan's bundles",
            responses={200: {"content": {OCTETS: {}}}, **responses(401, 403, 404, 422)})
def get_file(plan_id: ResId, sha256: Sha, svc: Service = Depends(service), who: Principal = READER):
    data = bundles.file(svc, plan_id, sha256, who)
    return Response(data, media_type=OCTETS, headers={"ETag": f'"{sha256}"', "Cache-Control": "public, max-age=31536000, immutable"})
