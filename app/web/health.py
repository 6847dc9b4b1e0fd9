"""``GET /saude`` (the health summary, 200 or 503) and ``GET /metrics`` (Prometheus).

Both served from a per-process snapshot at most ``STATUS_SNAPSHOT_SECONDS`` old, so scraping
cannot make the database scan its tables at will.
"""

from __future__ import annotations

import hmac
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST
from redis.asyncio import Redis
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.config import Settings
from app.ops import metrics
from app.ops.health import check_health, health_json, probe
from app.storage.database import Database
from app.ttl_cache import TtlCache
from app.web.common import bearer_token, error_response, settings_of

NO_STORE = {"Cache-Control": "no-store"}
METRICS_REFUSED = "Informe o token de métricas (Authorization: Bearer …)."
METRICS_CLOSED = "Página não encontrada."


async def public_health(
    settings: Settings, db: Database, redis: Redis
) -> tuple[dict[str, Any], int]:
    """The ``/saude`` body and its status code, computed now."""
    health = await check_health(settings, db, redis)
    return health_json(health, public=True), 200 if health.healthy else 503


async def saude(request: Request) -> Response:
    """200 when healthy; 503 with the reasons (``problemas``) when not."""
    snapshot: TtlCache[tuple[dict[str, Any], int]] = request.state.health_snapshot
    body, status = await snapshot()
    return JSONResponse(body, status_code=status, headers=NO_STORE)


def _metrics_closed(request: Request) -> bool:
    """In production, with no token, ``/metrics`` is not there unless opened on purpose
    (``METRICS_PUBLIC``): its numbers (queue sizes, failure classes, workers) tell an attacker
    how their load is doing, and a forgotten variable must not publish them."""
    settings = settings_of(request)
    return (
        settings.app_env == "production"
        and settings.metrics_token is None
        and not settings.metrics_public
    )


def _metrics_allowed(request: Request) -> bool:
    token = settings_of(request).metrics_token
    if token is None:
        return True
    given = bearer_token(request.headers.get("authorization", "")) or ""
    return hmac.compare_digest(given.encode(), token.encode())


async def metrics_endpoint(request: Request) -> Response:
    """Every number is read from the database and Redis (see ``app.ops.metrics``), at most a
    snapshot's age ago."""
    if _metrics_closed(request):
        return error_response(request, 404, METRICS_CLOSED)
    if not _metrics_allowed(request):
        response = error_response(request, 401, METRICS_REFUSED)
        response.headers["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    snapshot: TtlCache[bytes] = request.state.metrics_snapshot
    body = await snapshot()
    return Response(body, media_type=CONTENT_TYPE_LATEST, headers=NO_STORE)


async def metrics_text(settings: Settings, db: Database, redis: Redis) -> bytes:
    """The ``/metrics`` body, computed now."""
    snapshot = metrics.Snapshot(health=await check_health(settings, db, redis))
    if snapshot.health.database is not None:
        await probe(metrics.database_counters(db, snapshot), "database")
    if snapshot.health.redis is not None:
        stale_after = 3 * settings.alarm_check_seconds
        await probe(metrics.redis_counters(redis, snapshot, stale_after), "redis")
    return metrics.render(snapshot)
