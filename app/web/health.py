"""``GET /saude`` (the health summary, 200 or 503) and ``GET /metrics`` (Prometheus)."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app import metrics
from app.health import check_health, health_json, probe
from app.web.common import db_of, settings_of

NO_STORE = {"Cache-Control": "no-store"}


async def saude(request: Request) -> Response:
    """200 when healthy; 503 with the reasons (``problemas``) when not."""
    health = await check_health(settings_of(request), db_of(request), request.state.redis)
    return JSONResponse(
        health_json(health), status_code=200 if health.healthy else 503, headers=NO_STORE
    )


async def metrics_endpoint(request: Request) -> Response:
    """Every number is read now from the database and Redis (see ``app.metrics``)."""
    settings = settings_of(request)
    db, redis = db_of(request), request.state.redis
    snapshot = metrics.Snapshot(health=await check_health(settings, db, redis))
    if snapshot.health.database is not None:
        await probe(metrics.database_counters(db, snapshot), "database")
    if snapshot.health.redis is not None:
        stale_after = 3 * settings.alarm_check_seconds
        await probe(metrics.redis_counters(redis, snapshot, stale_after), "redis")
    return Response(metrics.render(snapshot), media_type=CONTENT_TYPE_LATEST, headers=NO_STORE)
