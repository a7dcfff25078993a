"""A scripted service for the native agent (tests/test_native_agent.py, bench/native.py):
the plan, bundle and telemetry routes an agent uses, answered from dicts a test changes."""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import threading
from pathlib import Path

from executor.bundle import manifest_bytes


class ScriptedService:
    """The service's plan, bundle and telemetry routes in a thread, from dicts the test
    changes: `plan` (id, revision) is the active plan; `bundles[plan_id]` its manifest
    bytes; `files[sha]` what it serves for a file; `away` answers 503 to everything."""

    def __init__(self) -> None:
        self.plan: tuple[str, int] | None = None
        self.bundles: dict[str, bytes] = {}
        self.files: dict[str, bytes] = {}
        self.batches: list[dict] = []
        self.away = False
        self.changed = threading.Condition()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # noqa: ANN002
                pass

            def _send(self, status: int, body: bytes = b"", **headers: str) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # an agent stopped mid long-poll
                    self.close_connection = True

            def do_GET(self) -> None:  # noqa: N802
                if outer.away:
                    return self._send(503, b'{"detail": "away"}')
                path = self.path.split("?")[0]
                if path == "/v1/deployments/cam/plan":
                    with outer.changed:  # a short long-poll
                        plan = outer.plan
                        if plan and self.headers.get("If-None-Match") == f'"r{plan[1]}-{plan[0]}"':
                            outer.changed.wait(0.3)
                            plan = outer.plan
                    if plan is None:
                        return self._send(404, b"{}")
                    etag = f'"r{plan[1]}-{plan[0]}"'
                    if self.headers.get("If-None-Match") == etag:
                        return self._send(304, ETag=etag)
                    body = json.dumps({"deployment": "cam", "revision": plan[1], "plan": {"plan_id": plan[0], "slices": []}})
                    return self._send(200, body.encode(), ETag=etag)
                m = re.match(r"^/v1/plans/([^/]+)/bundle(?:/files/([0-9a-f]{64}))?$", path)
                if m and m.group(2) is None and m.group(1) in outer.bundles:
                    raw = outer.bundles[m.group(1)]
                    return self._send(200, raw, ETag=f'"{hashlib.sha256(raw).hexdigest()}"')
                if m and m.group(2) in outer.files:
                    return self._send(200, outer.files[m.group(2)])
                return self._send(404, b"{}")

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if outer.away:
                    return self._send(503, b"{}")
                outer.batches.append(json.loads(body))
                return self._send(201, b"{}")

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

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
