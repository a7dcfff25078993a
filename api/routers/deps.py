"""Shared router dependencies. They are `async def` on purpose: FastAPI runs a sync
dependency in the thread pool, one hop per dependency per request, and these do
not block."""

from __future__ import annotations

from fastapi import Query, Request

from api.service import Service


async def service(request: Request) -> Service:
    return request.app.state.service


class Paging:
    def __init__(self, limit: int, offset: int):
        self.limit = limit
        self.offset = offset


async def paging(limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=1_000_000_000)) -> Paging:
    return Paging(limit, offset)
