"""Shared router dependencies."""

from __future__ import annotations

from fastapi import Query, Request

from api.service import Service


def service(request: Request) -> Service:
    return request.app.state.service


class Paging:
    def __init__(self, limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0, le=1_000_000_000)):
        self.limit = limit
        self.offset = offset
