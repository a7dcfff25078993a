"""Platforms and model profiles: uploaded as JSON, validated, immutable and
content-addressed (the same document twice gives the same id)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response

from api import views
from api.auth import Principal, require
from api.problems import responses
from api.routers.deps import Paging, paging, service
from api.schemas import DocumentInfo, DocumentList
from api.service import Service
from planner.schema import ModelProfile, Platform

router = APIRouter(prefix="/v1", tags=["documents"])
DocId = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$", description="sha256 content id")]
WRITE = Depends(require("pipeline"))
READ = Depends(require("pipeline"))


def _stored(svc: Service, kind: str, doc, response: Response) -> DocumentInfo:  # noqa: ANN001
    row, created = svc.put_document(kind, doc)
    response.status_code = 201 if created else 200
    response.headers["Location"] = f"/v1/{kind}s/{row.id}"
    return views.document(row, created)


@router.post("/platforms", status_code=201, response_model=DocumentInfo, summary="Upload a platform",
             responses={200: {"model": DocumentInfo, "description": "Already stored (same content, same id)"},
                        **responses(401, 403, 409, 413, 422)})
def upload_platform(platform: Platform, response: Response, svc: Service = Depends(service), _: Principal = WRITE):
    return _stored(svc, "platform", platform, response)


@router.get("/platforms", response_model=DocumentList, summary="List platforms", responses=responses(401, 403, 422))
def list_platforms(page: Paging = Depends(paging), svc: Service = Depends(service), _: Principal = READ):
    total, rows = svc.list_documents("platform", page.limit, page.offset)
    return DocumentList(total=total, limit=page.limit, offset=page.offset, items=[views.document(r) for r in rows])


@router.get("/platforms/{platform_id}", response_model=Platform, summary="Fetch a platform document",
            responses=responses(401, 403, 404, 422))
def get_platform(platform_id: DocId, svc: Service = Depends(service), _: Principal = READ):
    return Response(svc.document_body("platform", platform_id), media_type="application/json")


@router.post("/profiles", status_code=201, response_model=DocumentInfo, summary="Upload a model profile",
             responses={200: {"model": DocumentInfo, "description": "Already stored (same content, same id)"},
                        **responses(401, 403, 409, 413, 422)})
def upload_profile(profile: ModelProfile, response: Response, svc: Service = Depends(service), _: Principal = WRITE):
    return _stored(svc, "profile", profile, response)


@router.get("/profiles", response_model=DocumentList, summary="List model profiles", responses=responses(401, 403, 422))
def list_profiles(page: Paging = Depends(paging), svc: Service = Depends(service), _: Principal = READ):
    total, rows = svc.list_documents("profile", page.limit, page.offset)
    return DocumentList(total=total, limit=page.limit, offset=page.offset, items=[views.document(r) for r in rows])


@router.get("/profiles/{profile_id}", response_model=ModelProfile, summary="Fetch a model profile document",
            responses=responses(401, 403, 404, 422))
def get_profile(profile_id: DocId, svc: Service = Depends(service), _: Principal = READ):
    return Response(svc.document_body("profile", profile_id), media_type="application/json")
