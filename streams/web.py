"""The worker's HTTP endpoints: ``/healthz``, ``/readyz``, ``/metrics`` (Prometheus) and ``/occupancy``."""

from __future__ import annotations

from typing import Any

__all__ = ["serve"]


async def serve(worker: Any, host: str, port: int) -> Any:
    """Start serving the worker's endpoints; return the runner (``await runner.cleanup()`` stops it)."""
    from aiohttp import web
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        if worker.ready:
            return web.Response(text="ready\n")
        why = f"halted: {worker.halted}" if worker.halted else "not ready"
        return web.Response(text=why + "\n", status=503)

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(worker.metrics.registry)
        return web.Response(body=body, content_type=CONTENT_TYPE_LATEST.split(";")[0])

    async def occupancy(_: web.Request) -> web.Response:
        return web.json_response(worker.occupancy_view())

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/occupancy", occupancy)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
