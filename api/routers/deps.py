"""Shared router dependencies. They are `async def` on purpose: FastAPI runs a sync
dependency in the thread pool, one hop per dependency per request, and these do
not block."""

from __future__ import annotations

from typing import Literal

from fastapi import Query, Request

from api.service import ScheduleShape, Service


async def service(request: Request) -> Service:
    return request.app.state.service


class Paging:
    def __init__(self, limit: int, offset: int):
        self.limit = limit
        self.offset = offset


async def paging(limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=1_000_000_000)) -> Paging:
    return Paging(limit, offset)


async def schedule_shape(
    view: Literal["summary", "entries"] = Query(
        "summary", description="summary: the objectives by name, the best entry per objective and the counts; "
        "entries: a page of the Pareto set (offset, limit)"),
    offset: int = Query(0, ge=0, le=1_000_000, description="view=entries: first entry of the page (0-based)"),
    limit: int = Query(20, ge=1, le=1000, description="view=entries: entries per page"),
    timelines: bool = Query(False, description="Include each shown entry's per-PE timeline (large)"),
) -> ScheduleShape:
    return ScheduleShape(view, offset, limit, timelines)
