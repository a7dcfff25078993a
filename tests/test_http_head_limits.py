"""Request heads are bounded (issue 37, item 1): raw sockets against a real `planner serve`
process. A 100 kB header, 20,000 headers and a header line streamed without its end are
each answered 431 (or the connection closed) before the server's memory grows with them;
ordinary requests, large bodies and keep-alive still work."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from api.http_limits import MAX_HEAD_BYTES, MAX_HEADERS
from tests.support.server import Server


@pytest.fixture(scope="module", params=["auto", "h11"])
def server(request, tmp_path_factory):  # noqa: ANN001, ANN201
    srv = Server(tmp_path_factory.mktemp("heads"), insecure=True, extra_args=("--http", request.param)).start()
    yield request.param, srv
    srv.stop()


def exchange(srv: Server, payload: bytes, timeout_s: float = 20.0) -> bytes:
    """Send `payload` (ignoring a reset once the server has answered) and read the answer to its end."""
    with socket.create_connection(("127.0.0.1", srv.port), timeout=timeout_s) as s:
        try:
            s.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except ConnectionResetError:
            pass
        return got


def refused(answer: bytes, kind: str) -> bool:
    status = answer.split(b"\r\n", 1)[0]
    return status.startswith(b"HTTP/1.1 431") if kind == "auto" else (answer == b"" or status.startswith(b"HTTP/1.1 4"))


def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_large_header_refused(server):  # noqa: ANN001
    kind, srv = server
    for size in (100_000, 1_000_000):
        answer = exchange(srv, b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * size + b"\r\n\r\n")
        assert refused(answer, kind), answer[:200]
    assert httpx.get(f"{srv.url}/v1/health").status_code == 200


def test_many_headers_refused(server):  # noqa: ANN001
    kind, srv = server
    many = b"".join(b"X-%d: 1\r\n" % i for i in range(20_000))
    answer = exchange(srv, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n")
    assert refused(answer, kind), answer[:200]
    if kind == "auto":
        few = b"".join(b"X-%d: 1\r\n" % i for i in range(MAX_HEADERS + 1))
        assert refused(exchange(srv, b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" + few + b"\r\n"), kind)


def test_within_bounds_and_keep_alive_and_bodies_pass(server):  # noqa: ANN001
    _, srv = server
    headers = {f"X-{i}": "v" * 100 for i in range(40)}  # ~4.5 KiB of head: fine
    with httpx.Client(base_url=srv.url, timeout=30) as c:
        for _ in range(3):  # one connection, kept alive
            assert c.get("/v1/health", headers=headers).status_code == 200
        big = c.post("/v1/profiles", content=b"{" + b" " * 400_000 + b"}", headers={"Content-Type": "application/json"})
        assert big.status_code == 422, big.text  # a body far over the head bound is the body's business
        assert c.get("/v1/health").status_code == 200


def test_streamed_header_line_is_cut_before_memory_grows(server):  # noqa: ANN001
    kind, srv = server
    before = rss_kib(srv.proc.pid)
    socks = []
    try:
        for _ in range(16):  # each streams a header line without its end, 4 MB each at most
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Endless: ")
            socks.append(s)
        cut = 0
        for s in socks:
            try:
                for _ in range(64):
                    s.sendall(b"a" * 65536)
            except (BrokenPipeError, ConnectionResetError, socket.timeout):
                cut += 1
                continue
        time.sleep(0.5)
        grown_kib = rss_kib(srv.proc.pid) - before
    finally:
        for s in socks:
            s.close()
    assert cut == 16, f"only {cut} of 16 connections were cut"
    assert grown_kib < 64 * 1024, f"the server grew by {grown_kib} KiB"  # 16 x 4 MB would be 64 MiB
    assert httpx.get(f"{srv.url}/v1/health").status_code == 200
    assert MAX_HEAD_BYTES < 4 * 1024 * 1024
