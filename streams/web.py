"""The worker's HTTP endpoints: ``/healthz``, ``/readyz``, ``/metrics`` (Prometheus) and ``/occupancy``.

Four GET pages answered by a plain asyncio server (one request per connection): a web framework's
import alone took longer than the rest of a restart on a busy machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

__all__ = ["serve"]

_REASONS = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}


def _page(worker: Any, path: str) -> tuple[int, str, bytes]:
    """Return (status, content type, body) of one page."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    if path == "/healthz":
        return 200, "text/plain", b"ok\n"
    if path == "/readyz":
        if worker.ready:
            return 200, "text/plain", b"ready\n"
        why = f"halted: {worker.halted}" if worker.halted else "not ready"
        return 503, "text/plain", (why + "\n").encode()
    if path == "/metrics":
        return 200, CONTENT_TYPE_LATEST.split(";")[0], generate_latest(worker.metrics.registry)
    if path == "/occupancy":
        return 200, "application/json", json.dumps(worker.occupancy_view()).encode()
    return 404, "text/plain", b"not found\n"


async def serve(worker: Any, host: str, port: int) -> asyncio.Server:
    """Start serving the worker's pages; return the server (``close()`` it to stop)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await reader.readline()
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass  # headers: nothing in them changes a page
            parts = request.decode("latin-1").split()
            path = parts[1].split("?", 1)[0] if len(parts) >= 2 and parts[0] == "GET" else ""
            status, ctype, body = _page(worker, path)
            head = (
                f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    return await asyncio.start_server(handle, host, port)
