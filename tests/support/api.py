"""An in-process service (TestClient) with real tokens, for the API tests."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from fastapi.testclient import TestClient

from api.app import create_app
from api.auth import create_token
from api.settings import Limits, Settings


@dataclass
class Api:
    client: TestClient
    settings: Settings
    tokens: dict[str, str]

    @property
    def service(self):
        return self.client.app.state.service

    def h(self, who: str = "pipeline", **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}", **extra}

    def token(self, name: str, scopes: list[str], deployments: list[str] = ()) -> str:
        _, secret = create_token(self.service.db, name, scopes, list(deployments))
        self.tokens[name] = secret
        return secret

    def upload(self, kind: str, doc: dict) -> str:
        r = self.client.post(f"/v1/{kind}s", json=doc, headers=self.h())
        assert r.status_code in (200, 201), r.text
        return r.json()["id"]

    def wait_job(self, job_id: str, states=("succeeded", "failed", "cancelled"), timeout_s: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            job = self.client.get(f"/v1/jobs/{job_id}", headers=self.h()).json()
            if job["state"] in states:
                return job
            time.sleep(0.05)
        raise AssertionError(f"job {job_id} not in {states} after {timeout_s} s: {job}")


def make_settings(data_dir: Path, **kw) -> Settings:
    base = Settings(data_dir=data_dir, token_cache_s=0.0, timeout_grace_s=0.5, plan_workers=1,
                    solver_modules=("tests.support.slow_solver",), poll_interval_s=0.2,
                    limits=Limits(max_body_bytes=2_000_000, max_layers=400, max_devices=8, max_targets=64,
                                  max_time_limit_s=120.0, max_wait_s=10.0))
    return replace(base, **kw)


def start(data_dir: Path, raise_server_exceptions: bool = True, **kw) -> Api:
    """raise_server_exceptions=False: a 500 is an answer to check, not an exception."""
    settings = make_settings(data_dir, **kw)
    client = TestClient(create_app(settings), raise_server_exceptions=raise_server_exceptions)
    client.__enter__()
    api = Api(client, settings, {})
    for scope in ("admin", "pipeline"):
        api.token(scope, [scope])
    api.token("executor", ["executor"])  # bound to nothing
    return api
