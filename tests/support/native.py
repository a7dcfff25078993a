"""A scripted service for the native agent (tests/test_native_agent.py, bench/native.py):
the plan, bundle and telemetry routes an agent uses, answered from dicts a test changes."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path

from executor.bundle import manifest_bytes
from tests.support.scripted_http import ScriptedHandler, ScriptedServer


class ScriptedService(ScriptedServer):
    """The service's plan, bundle and telemetry routes in a thread (serving from
    construction), from dicts the test changes: `plan` (id, revision) is the active plan;
    `bundles[plan_id]` its manifest bytes; `files[sha]` what it serves for a file; `away`
    answers 503 to everything."""

    def __init__(self) -> None:
        super().__init__()
        self.plan: tuple[str, int] | None = None
        self.bundles: dict[str, bytes] = {}
        self.files: dict[str, bytes] = {}
        self.batches: list[dict] = []
        self.away = False
        self.changed = threading.Condition()
        self.start()

    def get(self, h: ScriptedHandler) -> None:
        if self.away:
            return h.send(503, b'{"detail": "away"}')
        path = h.path.split("?")[0]
        if path == "/v1/deployments/cam/plan":
            return self._plan(h)
        m = re.match(r"^/v1/plans/([^/]+)/bundle(?:/files/([0-9a-f]{64}))?$", path)
        if m and m.group(2) is None and m.group(1) in self.bundles:
            raw = self.bundles[m.group(1)]
            return h.send(200, raw, ETag=f'"{hashlib.sha256(raw).hexdigest()}"')
        if m and m.group(2) in self.files:
            return h.send(200, self.files[m.group(2)])
        return h.send(404, b"{}")

    def _plan(self, h: ScriptedHandler) -> None:
        with self.changed:  # a short long-poll
            plan = self.plan
            if plan and h.headers.get("If-None-Match") == f'"r{plan[1]}-{plan[0]}"':
                self.changed.wait(0.3)
                plan = self.plan
        if plan is None:
            return h.send(404, b"{}")
        etag = f'"r{plan[1]}-{plan[0]}"'
        if h.headers.get("If-None-Match") == etag:
            return h.send(304, ETag=etag)
        body = json.dumps({"deployment": "cam", "revision": plan[1], "plan": {"plan_id": plan[0], "slices": []}})
        return h.send(200, body.encode(), ETag=etag)

    def post(self, h: ScriptedHandler) -> None:
        body = h.body()
        if self.away:
            return h.send(503, b"{}")
        self.batches.append(json.loads(body))
        return h.send(201, b"{}")

    def add(self, plan_id: str, directory: Path, manifest: dict) -> None:
        self.bundles[plan_id] = manifest_bytes(manifest)
        for s in manifest["slices"]:
            self.files[s["sha256"]] = (directory / s["file"]).read_bytes()

    def activate(self, plan_id: str, revision: int) -> None:
        with self.changed:
            self.plan = (plan_id, revision)
            self.changed.notify_all()

    def samples(self, plan_id: str) -> int:
        return sum(len(b["samples"]) for b in list(self.batches) if b.get("plan_id") == plan_id)

    def errors(self, kind: str) -> list[dict]:
        return [e for b in list(self.batches) for e in b["errors"] if e["kind"] == kind]
