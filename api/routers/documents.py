"""Input documents: uploaded as JSON, validated, immutable and content-addressed (the
same document twice gives the same id). Platforms and model profiles feed every
solver but AsyMo, which plans an AsyMo CPU description and a network of multiplies."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response

from api import views
from api.auth import Principal, require
from api.problems import responses
from api.routers.deps import Paging, paging, service
from api.schemas import DocumentInfo, DocumentList
from api.service import Service
from planner.core.asymo_schema import AsymoCpu, AsymoNetwork
from planner.core.schema import ModelProfile, Platform

router = APIRouter(prefix="/v1", tags=["documents"])
DocId = Annotated[str, Path(pattern=r"^[0-9a-f]{64}$", description="sha256 content id")]
WRITE = Depends(require("pipeline"))
READ = Depends(require("pipeline"))


def _routes(kind: str, model: type, title: str, plural: str, note: str = "") -> None:
    """POST /v1/{kind}s, GET /v1/{kind}s and GET /v1/{kind}s/{id} for one document type."""
    collection = f"/{kind}s"

    def upload(doc, response: Response, svc: Service = Depends(service), _: Principal = WRITE):  # noqa: ANN001
        row, created = svc.put_document(kind, doc)
        response.status_code = 201 if created else 200
        response.headers["Location"] = f"/v1{collection}/{row.id}"
        return views.document(row, created)

    upload.__annotations__["doc"] = model  # a real type: this module's annotations are strings

    def listing(page: Paging = Depends(paging), svc: Service = Depends(service), _: Principal = READ):
        total, rows = svc.list_documents(kind, page.limit, page.offset)
        return DocumentList(total=total, limit=page.limit, offset=page.offset, items=[views.document(r) for r in rows])

    def fetch(doc_id: DocId, svc: Service = Depends(service), _: Principal = READ):
        return Response(svc.document_body(kind, doc_id), media_type="application/json")

    name = kind.replace("-", "_")
    router.add_api_route(
        collection, upload, methods=["POST"], status_code=201, response_model=DocumentInfo,
        summary=f"Upload {title}", description=note, operation_id=f"upload_{name}",
        responses={200: {"model": DocumentInfo, "description": "Already stored (same content, same id)"},
                   **responses(401, 403, 409, 413, 422)})
    router.add_api_route(collection, listing, methods=["GET"], response_model=DocumentList,
                         summary=f"List {plural}", operation_id=f"list_{name}s", responses=responses(401, 403, 422))
    router.add_api_route(f"{collection}/{{doc_id}}", fetch, methods=["GET"], response_model=model,
                         summary=f"Fetch {title}", operation_id=f"get_{name}", responses=responses(401, 403, 404, 422))


_routes("platform", Platform, "a platform", "platforms")
_routes("profile", ModelProfile, "a model profile", "model profiles")
_routes("asymo-cpu", AsymoCpu, "an AsyMo CPU description", "AsyMo CPU descriptions",
        "Clusters of an asymmetric CPU with their measured multiply rows; name it as platform_id in a plan request "
        "with solver `asymo`.")
_routes("asymo-network", AsymoNetwork, "an AsyMo network", "AsyMo networks",
        "A network's matrix multiplies in execution order; name it as profile_id in a plan request with solver `asymo`.")
