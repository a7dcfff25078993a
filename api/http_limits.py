"""Bounds on a request's head (request line and headers), enforced by the HTTP parser's
protocol before any ASGI code runs: neither uvicorn's httptools protocol nor llhttp caps
a header's size or the number of headers, so one unauthenticated connection streaming a
header line without its end grows the server's memory as long as it sends. A head over
`MAX_HEAD_BYTES` or with more than `MAX_HEADERS` headers is answered 431 and the
connection closed; memory held for a head stays under the limit plus one read.

`protocol(kind)` is what `planner serve` hands uvicorn as its `http` (a class); with h11,
h11's own buffer limit (`h11_max_incomplete_event_size`) bounds the head (400, close)."""

from __future__ import annotations

MAX_HEAD_BYTES = 32 * 1024  # request line + every header; browsers and proxies send a few KiB
MAX_HEADERS = 100


class HeadTooLarge(Exception):
    """Raised from a parser callback to stop parsing at once (httptools re-raises it)."""


def _answer_431(protocol, why: str) -> None:  # noqa: ANN001
    body = f"request header fields too large: {why}".encode()
    protocol.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
                             b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)
    protocol.transport.close()


def httptools_protocol(max_head_bytes: int = MAX_HEAD_BYTES, max_headers: int = MAX_HEADERS):  # noqa: ANN201
    import httptools
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class BoundedHeadProtocol(HttpToolsProtocol):
        """Counts the bytes of the head being received (from the first byte of a request
        to its headers' end) and its headers; past either bound, 431 and close."""

        _head_bytes = 0
        _edges = 0  # heads ended + messages ended: where counting the head stops or starts again
        _in_head = True
        _header_count = 0
        _head_size = 0

        def on_message_begin(self) -> None:
            self._header_count = 0
            self._head_size = 0
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:
            self._grow(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._header_count += 1
            if self._header_count > max_headers:
                raise HeadTooLarge(f"more than {max_headers} headers")
            self._grow(len(name) + len(value) + 4)
            super().on_header(name, value)

        def _grow(self, n: int) -> None:
            """A head parsed whole within one read is counted here (the reads count the rest)."""
            self._head_size += n
            if self._head_size > max_head_bytes:
                raise HeadTooLarge(f"the request line and headers exceed {max_head_bytes} bytes")

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._edges += 1
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head = True
            self._edges += 1  # the next bytes start the next request's head

        def data_received(self, data: bytes) -> None:
            self._unset_keepalive_if_required()
            edges = self._edges
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserCallbackError as exc:
                cause = exc.__cause__ or exc.__context__
                if isinstance(cause, HeadTooLarge):
                    return _answer_431(self, str(cause))
                return super().send_400_response("Invalid HTTP request received.")
            except httptools.HttpParserError:
                return super().send_400_response("Invalid HTTP request received.")
            except httptools.HttpParserUpgrade:
                if self._should_upgrade():
                    self.handle_websocket_upgrade()
                else:
                    self._unsupported_upgrade_warning()
                return
            if self._edges != edges:  # a head or a request ended in this read: the next head has at most this read
                self._head_bytes = 0
            elif self._in_head:
                self._head_bytes += len(data)
            if self._in_head and self._head_bytes > max_head_bytes:
                _answer_431(self, f"the request line and headers exceed {max_head_bytes} bytes")

    return BoundedHeadProtocol


def h11_protocol(max_head_bytes: int = MAX_HEAD_BYTES, max_headers: int = MAX_HEADERS):  # noqa: ANN201
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedHeadH11Protocol(H11Protocol):
        """h11 bounds a head that arrives in pieces (its incomplete-event buffer, set to
        `max_head_bytes` by `planner serve`); a head that arrives whole is checked here."""

        _too_large = ""

        def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
            super().__init__(*args, **kwargs)
            next_event = self.conn.next_event

            def bounded_next_event():  # noqa: ANN202
                event = next_event()
                if isinstance(event, h11.Request):
                    size = len(event.target) + sum(len(n) + len(v) + 4 for n, v in event.headers)
                    if len(event.headers) > max_headers:
                        self._too_large = f"more than {max_headers} headers"
                    elif size > max_head_bytes:
                        self._too_large = f"the request line and headers exceed {max_head_bytes} bytes"
                    if self._too_large:
                        raise h11.RemoteProtocolError(self._too_large, error_status_hint=431)
                return event

            self.conn.next_event = bounded_next_event

        def send_400_response(self, msg: str) -> None:
            if self._too_large:
                return _answer_431(self, self._too_large)
            super().send_400_response(msg)

    return BoundedHeadH11Protocol


def protocol(kind: str):  # noqa: ANN201
    """uvicorn's `http` for `--http KIND` (h11, httptools, or either: httptools where installed), a bounded class."""
    import importlib.util

    if kind == "h11" or (kind != "httptools" and importlib.util.find_spec("httptools") is None):
        return h11_protocol()
    return httptools_protocol()
