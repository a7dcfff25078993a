"""API tokens, for admins: create (the secret is in the answer, once), list (never
secrets), revoke. The same store `planner token` writes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path
from starlette.concurrency import run_in_threadpool

from api.auth import Principal, TokenInfo, create_token, list_tokens, require, revoke_token
from api.problems import ApiError, invalid, responses
from api.routers.deps import service
from api.schemas import TokenCreated, TokenList, TokenRequest, TokenResource
from api.service import Service
from api.views import aware

router = APIRouter(prefix="/v1", tags=["tokens"])
ADMIN = Depends(require("admin"))
TokenId = Annotated[str, Path(pattern=r"^tok_[0-9a-f]{1,32}$", description="Token id (tok_...)")]


def _resource(t: TokenInfo) -> TokenResource:
    return TokenResource(id=t.id, name=t.name, scopes=t.scopes, deployments=t.deployments,
                         created_at=aware(t.created_at), revoked_at=aware(t.revoked_at))


@router.post("/tokens", status_code=201, response_model=TokenCreated, summary="Create a token",
             description="Answers the secret once; only its hash is stored.", responses=responses(401, 403, 413, 422))
async def create(req: TokenRequest, svc: Service = Depends(service), _: Principal = ADMIN):
    try:
        token_id, secret = await run_in_threadpool(create_token, svc.db, req.name, list(req.scopes), req.deployments)
    except ValueError as exc:
        raise invalid("deployments" if "deployments" in str(exc) else "scopes", str(exc)) from None
    info = next(t for t in await run_in_threadpool(list_tokens, svc.db) if t.id == token_id)
    return TokenCreated(**_resource(info).model_dump(), secret=secret)


@router.get("/tokens", response_model=TokenList, summary="List tokens", description="Never their secrets.",
            responses=responses(401, 403))
async def listing(svc: Service = Depends(service), _: Principal = ADMIN):
    return TokenList(items=[_resource(t) for t in await run_in_threadpool(list_tokens, svc.db)])


@router.delete("/tokens/{token_id}", response_model=TokenResource, summary="Revoke a token",
               description="The token stops working at once on every replica (PostgreSQL NOTIFY; within the token cache "
                           "time, PLANNER_TOKEN_CACHE_S, were that message lost), and so do its web UI sessions.",
               responses=responses(401, 403, 404, 422))
async def revoke(token_id: TokenId, svc: Service = Depends(service), _: Principal = ADMIN):
    await run_in_threadpool(revoke_token, svc.db, token_id, svc.bus)  # every replica forgets it at once
    info = next((t for t in await run_in_threadpool(list_tokens, svc.db) if t.id == token_id), None)
    if info is None:
        raise ApiError(404, f"no token with id {token_id}")
    return _resource(info)
