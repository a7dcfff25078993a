"""A local HTTP/1.1 service in a thread whose answers a test scripts: the scaffolding the
agents' fake services share (tests/support/native.py, tests/test_agent.py,
tests/test_agent_round3.py), so each states only what it answers."""

from __future__ import annotations

import http.server
import threading


class ScriptedHandler(http.server.BaseHTTPRequestHandler):
    """Hands each GET and POST to the server's script (`ScriptedServer.get` / `.post`)."""

    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, *args) -> None:  # noqa: ANN002
        pass

    def send(self, status: int, body: bytes = b"", **headers: str) -> None:
        """One answer with its length; a client that hung up (an agent stopped mid
        long-poll, or one that refused a hostile answer) closes the connection."""
        try:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def do_GET(self) -> None:  # noqa: N802
        self.server.script.get(self)

    def do_POST(self) -> None:  # noqa: N802
        self.server.script.post(self)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    script: "ScriptedServer"


class ScriptedServer:
    """Listens on a free local port from construction (`url`); serves once started
    (`start()`, or as a context manager, which also stops it). Subclasses answer in
    `get(handler)` and `post(handler)`: 404 unless they do."""

    def __init__(self) -> None:
        self.httpd = _Server(("127.0.0.1", 0), ScriptedHandler)
        self.httpd.script = self
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> "ScriptedServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):  # noqa: ANN204 - the subclass
        return self.start()

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self.stop()

    def get(self, handler: ScriptedHandler) -> None:
        handler.send(404, b"{}")

    def post(self, handler: ScriptedHandler) -> None:
        handler.send(404, b"{}")
