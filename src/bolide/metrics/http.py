"""The Prometheus endpoint of a broker or controller (RocketMQ 5's ``metricsExporterType=PROM``):
a small HTTP/1.1 server on the server's event loop answering ``GET /metrics`` with the text
format.

One request per connection at a time, requests up to 8 KiB of head, 10 s to send it, at most
``MAX_CONNECTIONS`` connections; anything else gets 400, 404 or 405 and the connection closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from bolide.common.waiting import wait_for
from bolide.metrics.exposition import CONTENT_TYPE

log = logging.getLogger(__name__)

MAX_HEAD = 8192
HEAD_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 64
PATHS = ("/metrics", "/")


class MetricsEndpoint:
    """Serves ``render()`` (the exposition text) on ``host:port`` (0: any free port)."""

    def __init__(self, render: Callable[[], str], host: str, port: int) -> None:
        self.render = render
        self.host, self.requested_port = host, port
        self.port = -1
        self._server: asyncio.Server | None = None
        self._connections = 0

    async def start(self) -> MetricsEndpoint:
        try:
            self._server = await asyncio.start_server(self._serve, self.host or None, self.requested_port)
        except OSError as exc:
            raise OSError(f"the metrics port {self.requested_port} is not available ({exc}): free it or "
                          "set metricsPromExporterPort") from None
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("Prometheus metrics on http://%s:%d/metrics", self.host or "0.0.0.0", self.port)
        return self

    async def close(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            server.close()
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections += 1
        try:
            if self._connections > MAX_CONNECTIONS:
                await _answer(writer, 503, "too many connections\n")
                return
            while True:
                try:
                    head = await wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
                except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
                    return
                except asyncio.LimitOverrunError:
                    await _answer(writer, 400, "request head too large\n")
                    return
                if len(head) > MAX_HEAD:
                    await _answer(writer, 400, "request head too large\n")
                    return
                method, path, keep = _request_line(head)
                if method not in ("GET", "HEAD"):
                    await _answer(writer, 405 if method else 400, "only GET /metrics is served\n")
                    return
                if path.split("?", 1)[0] not in PATHS:
                    await _answer(writer, 404, "not found: the metrics are at /metrics\n")
                    return
                await _answer(writer, 200, self.render(), head_only=method == "HEAD", keep_alive=keep,
                              content_type=CONTENT_TYPE)
                if not keep:
                    return
        except ConnectionError:
            return
        finally:
            self._connections -= 1
            with contextlib.suppress(Exception):
                writer.close()


def _request_line(head: bytes) -> tuple[str, str, bool]:
    """(method, path, keep-alive) of a request head; ("", "", False) when it does not parse."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return "", "", False
    headers = {k.strip().lower(): v.strip().lower() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
    keep = parts[2] == "HTTP/1.1" and headers.get("connection") != "close"
    return parts[0], parts[1], keep


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            503: "Service Unavailable"}


async def _answer(writer: asyncio.StreamWriter, code: int, text: str, *, head_only: bool = False,
                  keep_alive: bool = False, content_type: str = "text/plain; charset=utf-8") -> None:
    body = text.encode()
    head = (f"HTTP/1.1 {code} {_REASONS[code]}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n")
    writer.write(head.encode() + (b"" if head_only else body))
    await writer.drain()
