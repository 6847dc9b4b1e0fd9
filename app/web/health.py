"""``GET /saude`` (the health summary, 200 or 503) and ``GET /metrics`` (Prometheus).

Both are served from a per-process snapshot at most ``STATUS_SNAPSHOT_SECONDS`` old
(``app.ops.snapshots``), so scraping them cannot make the database scan its tables at will.
``/saude`` is public and shows failures by class only; with ``METRICS_TOKEN`` set, ``/metrics``
needs ``Authorization: Bearer <METRICS_TOKEN>``.
"""

from __future__ import annotations

import hmac
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.ops import metrics
from app.ops.health import check_health, health_json, probe
from app.ops.snapshots import Snapshots
from app.web.common import db_of, error_response, settings_of

NO_STORE = {"Cache-Control": "no-store"}
METRICS_REFUSED = "Informe o token de métricas (Authorization: Bearer …)."


async def saude(request: Request) -> Response:
    """200 when healthy; 503 with the reasons (``problemas``) when not."""
    snapshots: Snapshots = request.state.snapshots
    settings, db, redis = settings_of(request), db_of(request), request.state.redis

    async def compute() -> tuple[dict[str, Any], int]:
        health = await check_health(settings, db, redis)
        return health_json(health, public=True), 200 if health.healthy else 503

    body, status = await snapshots.get("saude", compute)
    return JSONResponse(body, status_code=status, headers=NO_STORE)


def _metrics_allowed(request: Request) -> bool:
    token = settings_of(request).metrics_token
    if token is None:
        return True
    header = request.headers.get("authorization", "")
    given = header[7:].strip() if header[:7].lower() == "bearer " else ""
    return hmac.compare_digest(given.encode(), token.encode())


async def metrics_endpoint(request: Request) -> Response:
    """Every number is read from the database and Redis (see ``app.ops.metrics``), at most a
    snapshot's age ago."""
    if not _metrics_allowed(request):
        response = error_response(request, 401, METRICS_REFUSED)
        response.headers["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    snapshots: Snapshots = request.state.snapshots
    settings = settings_of(request)
    db, redis = db_of(request), request.state.redis

    async def compute() -> bytes:
        snapshot = metrics.Snapshot(health=await check_health(settings, db, redis))
        if snapshot.health.database is not None:
            await probe(metrics.database_counters(db, snapshot), "database")
        if snapshot.health.redis is not None:
            stale_after = 3 * settings.alarm_check_seconds
            await probe(metrics.redis_counters(redis, snapshot, stale_after), "redis")
        return metrics.render(snapshot)

    body = await snapshots.get("metrics", compute)
    return Response(body, media_type=CONTENT_TYPE_LATEST, headers=NO_STORE)
