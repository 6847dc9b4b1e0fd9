"""Builds the Starlette app: routes, middleware, lifespan. Run with ``uvicorn app.main:app``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import jinja2
import jinja2.bccache
from anyio import CapacityLimiter
from arq.connections import ArqRedis
from sqlalchemy.exc import DBAPIError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from app.batches.isolation import READERS_PER_PROCESS
from app.bounces.reasons import history_line
from app.clock import duration
from app.config import ConfigError, Settings, load_settings
from app.invites.occasion import occasion_of, occasion_words, when_and_where
from app.invites.status import CANCELLABLE, LABELS, PAUSED_LABEL, RESCHEDULABLE, RESENDABLE
from app.invites.validation import shown_email
from app.live.feed import LiveFeed
from app.live.hub import Hub
from app.live.wakeups import Announcer
from app.logs import configure_logging, correlation_id
from app.ops.alarms import monitor_forever
from app.ops.heap import collector_tuned_for_serving
from app.ops.metrics import SseConnections
from app.sending.pause import SendingNotice
from app.sending.queue import Publisher
from app.storage.database import Database, unavailable
from app.ttl_cache import TtlCache
from app.web import health, summary
from app.web.common import error_response, signed_in_account
from app.web.events import render_row
from app.web.middleware.body_limit import BodyLimitMiddleware
from app.web.middleware.correlation import CorrelationIdMiddleware
from app.web.middleware.csrf import CsrfMiddleware, csrf_field, csrf_token_global
from app.web.middleware.hosts import HostCheckMiddleware, allowed_hosts
from app.web.middleware.security_headers import SecurityHeadersMiddleware, add_security_headers
from app.web.middleware.sessions import SchemeAwareSessionMiddleware
from app.web.present import (
    CONNECTION_LOST,
    PAUSED_NOTICE,
    RECONNECTING,
    RESUMED_NOTICE,
    TEAM_PAUSED_NOTICE,
    announcement,
    can_remind,
    describe,
    describe_paused,
    describe_signin,
    event_text,
    local_datetime,
    local_input,
    local_time,
    seconds_until_slow,
)
from app.web.routes import routes
from app.web.static import StaticAssets

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger(__name__)


class CompiledOnce(jinja2.BytecodeCache):
    """Each template compiled once per process, however many apps the process builds (a test
    run builds hundreds; each compiled every template again). Jinja checks each entry against
    its template's source, so an edited template is compiled anew."""

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        code = self._code.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self._code[bucket.key] = bucket.bytecode_to_string()


COMPILED_TEMPLATES = CompiledOnce()


def build_templates(static: StaticAssets) -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(ROOT / "templates"))
    templates.env.bytecode_cache = COMPILED_TEMPLATES
    templates.env.filters["shown_email"] = shown_email
    templates.env.globals.update(
        describe=describe,
        describe_paused=describe_paused,
        describe_signin=describe_signin,
        signed_in_account=signed_in_account,
        duration=duration,
        announcement=announcement,
        seconds_until_slow=seconds_until_slow,
        event_text=event_text,
        local_time=local_time,
        local_datetime=local_datetime,
        local_input=local_input,
        can_remind=can_remind,
        occasion_of=occasion_of,
        occasion_words=occasion_words,
        when_and_where=when_and_where,
        csrf_token=csrf_token_global,
        csrf_field=csrf_field,
        static_url=static.url_for,
        PAUSED_NOTICE=PAUSED_NOTICE,
        TEAM_PAUSED_NOTICE=TEAM_PAUSED_NOTICE,
        RESUMED_NOTICE=RESUMED_NOTICE,
        STATUS_LABELS=LABELS,
        PAUSED_LABEL=PAUSED_LABEL,
        RECONNECTING=RECONNECTING,
        CONNECTION_LOST=CONNECTION_LOST,
        bounce_line=history_line,
        CANCELLABLE=CANCELLABLE,
        RESENDABLE=RESENDABLE,
        RESCHEDULABLE=RESCHEDULABLE,
        FILTERS=summary.FILTERS,
    )
    # Compiled now, not while the first streams of a burst wait for their rows.
    for name in ("_invite_row.html", "_signin_row.html", "_notice.html"):
        templates.get_template(name)
    return templates


SHUTDOWN_STEP_SECONDS = 5.0


async def _bounded(step: Awaitable[Any], what: str) -> None:
    """Await one shutdown step for at most ``SHUTDOWN_STEP_SECONDS``; log, never raise."""
    try:
        await asyncio.wait_for(step, SHUTDOWN_STEP_SECONDS)
    except asyncio.CancelledError:
        if what != "alarm monitor":  # the monitor is cancelled on purpose
            raise
    except Exception as exc:  # shutdown goes on whatever one part did
        log.warning("shutdown step failed", extra={"step": what, "error": repr(exc)})


def _lifespan(settings: Settings, static: StaticAssets, warm_up: bool) -> Any:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        db = Database(settings.database_url)
        # No connection at start-up: the web must serve (and keep accepting invites into the
        # outbox) while Redis is down; short timeouts keep a dead Redis from stalling requests.
        redis = ArqRedis.from_url(settings.redis_url, socket_connect_timeout=1, socket_timeout=2)
        publisher = Publisher(db, redis)
        sse = SseConnections()
        # Alarms live in the web, not the workers: they must fire when every worker is down.
        monitor = asyncio.create_task(monitor_forever(settings, db, redis, sse))
        # Wake-ups for the open SSE streams: Redis pub/sub, and a periodic check for lost ones.
        hub = Hub(settings.redis_url, db, check_seconds=settings.worker_heartbeat_seconds)
        await hub.start()
        announcer = Announcer(redis, ring_here=hub.ring)
        templates = build_templates(static)
        feed = LiveFeed(db, partial(render_row, templates, settings=settings))
        # A server's first burst needs the live read's SQL compiled; an app built for one test
        # (``tests.fixtures.running_app``) does not, and the compiling was a sixth of its CPU.
        warming = asyncio.create_task(feed.warm(), name="live-feed-warm") if warm_up else None
        try:
            with collector_tuned_for_serving():
                yield {
                    "settings": settings,
                    "db": db,
                    "redis": redis,
                    "publisher": publisher,
                    "announcer": announcer,
                    "templates": templates,
                    "sse": sse,
                    "hub": hub,
                    "feed": feed,
                    "batch_readers": CapacityLimiter(READERS_PER_PROCESS),
                    # The notice on every page: paused by the team, or no worker alive.
                    "paused": SendingNotice(db, redis, settings.worker_heartbeat_seconds),
                    "health_snapshot": TtlCache(
                        partial(health.public_health, settings, db, redis),
                        settings.status_snapshot_seconds,
                    ),
                    "metrics_snapshot": TtlCache(
                        partial(health.metrics_text, settings, db, redis),
                        settings.status_snapshot_seconds,
                    ),
                }
        finally:
            # Every step is bounded: a store that stopped answering must not hold the server
            # (or a test) in its shutdown for ever.
            monitor.cancel()
            if warming is not None:
                warming.cancel()
            await _bounded(hub.close(), "live hub")
            await _bounded(publisher.close(), "publisher")
            await _bounded(monitor, "alarm monitor")
            await _bounded(sse.forget(redis), "open-stream counter")
            await _bounded(redis.aclose(), "redis")
            await _bounded(db.dispose(), "database")

    return lifespan


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    messages = {
        404: "Página não encontrada.",
        405: "Este endereço não aceita esse tipo de pedido.",
        413: "O pedido é grande demais.",
    }
    return error_response(
        request, exc.status_code, messages.get(exc.status_code, "Pedido inválido.")
    )


async def _client_gone(request: Request, exc: Exception) -> Response:
    # The client hung up while sending its body: nothing was read, nothing written, and no one
    # is there to read an answer. Not a server error.
    log.info("client disconnected before its request body arrived")
    return Response(status_code=400)


async def _database_error(request: Request, exc: Exception) -> Response:
    if not unavailable(exc):
        return await _server_error(request, exc)
    # Nothing was written (the transaction rolled back), and the same request will work in a
    # moment.
    response = await _server_error(request, exc, status=503)
    response.headers["Retry-After"] = "5"
    return response


async def _server_error(request: Request, exc: Exception, status: int = 500) -> Response:
    # This handler runs outside every middleware: put the request's correlation id back for
    # the log line, and the headers the middleware would have added on the response.
    request_id = request.scope.get("correlation_id")
    token = correlation_id.set(request_id)
    try:
        log.error("unhandled error", exc_info=exc)
    finally:
        correlation_id.reset(token)
    message = (
        "O banco de dados está indisponível por um instante. Nada foi salvo; tente de novo."
        if status == 503
        else "Algo deu errado do nosso lado. Tente de novo em instantes."
    )
    response = error_response(request, status, message)
    add_security_headers(response.headers, request.url.scheme)
    if request_id:
        response.headers["X-Request-ID"] = request_id
    return response


def create_app(settings: Settings | None = None, *, warm_up: bool = True) -> Starlette:
    """The whole web app, configured by ``settings`` (default: the environment); ``warm_up``:
    compile the live read's SQL in the background at start-up (``LiveFeed.warm``)."""
    settings = settings or load_settings()
    static = StaticAssets(ROOT / "static")
    app_routes = routes(settings, static)
    # Outermost first. Every piece is pure ASGI, so SSE responses stream through untouched.
    # uvicorn's proxy-headers middleware, added here (uvicorn runs with --no-proxy-headers) so
    # that TRUST_PROXY_HEADERS/TRUSTED_PROXIES is the one switch, whatever serves the app.
    middleware = (
        [
            Middleware(
                ProxyHeadersMiddleware, trusted_hosts=[str(n) for n in settings.trusted_proxies]
            )
        ]
        if settings.trust_proxy_headers
        else []
    )
    middleware += [
        Middleware(HostCheckMiddleware, allowed=allowed_hosts(settings)),
        Middleware(CorrelationIdMiddleware),
        Middleware(SecurityHeadersMiddleware),
        Middleware(
            BodyLimitMiddleware,
            max_bytes=settings.max_body_bytes,
            larger=tuple(
                (prefix, max(settings.batch_max_bytes, settings.max_body_bytes))
                for prefix in ("/lotes", "/api/v1/lotes")
            ),
        ),
        Middleware(
            SchemeAwareSessionMiddleware,
            secret_key=settings.secret_key,
            cookie="convites_sessao",
            max_age=400 * 24 * 3600,
            always_secure=settings.https_only_cookies,
        ),
        Middleware(
            CsrfMiddleware,
            secret_key=settings.secret_key,
            ops_token=settings.ops_token,
            routes=app_routes,
        ),
    ]
    return Starlette(
        routes=app_routes,
        middleware=middleware,
        lifespan=_lifespan(settings, static, warm_up),
        exception_handlers={
            HTTPException: _http_error,
            ClientDisconnect: _client_gone,
            DBAPIError: _database_error,
            ConnectionError: _database_error,
            Exception: _server_error,
        },
    )


def _app_from_environment() -> Starlette:
    configure_logging("web")
    try:
        settings = load_settings()
    except ConfigError as exc:
        # One line naming the variable, not a traceback through uvicorn's loader.
        raise SystemExit(f"Convites cannot start: {exc}") from None
    return create_app(settings)


def __getattr__(name: str) -> Any:
    # `uvicorn app.main:app` reads the environment when the server starts, not at import.
    if name == "app":
        return _app_from_environment()
    raise AttributeError(name)
