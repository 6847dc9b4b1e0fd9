"""Real services for the tests: redis-server on a free port, SQLite files, an SMTP server.

A pytest plugin (``pytest_plugins`` in the root ``conftest.py``), shared by ``tests/`` and
``e2e/``; its plain helpers (``make_settings``, ``process_env``…) are imported as usual.

Nothing here is a mock. The SMTP server is aiosmtpd answering what a test scripts (250, 4xx,
5xx, or a stall); Redis is the real binary; the database is a real SQLite file built by the
real Alembic migrations (once per run, then copied for each test: ``migrate``) or a PostgreSQL
database.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import time_machine
from arq.cron import CronJob
from arq.worker import Worker
from redis.asyncio import Redis
from sqlalchemy.engine import make_url
from starlette.types import Receive, Scope, Send

from app import clock as app_clock
from app.bounces.receiver import bounce_receiver
from app.config import Settings, SmtpSettings, load_settings
from app.main import create_app
from app.sending.worker import worker_options
from app.storage.database import Database
from app.storage.migrate import upgrade
from tests.helpers import client_for
from tests.services import PostgresServer, RedisServer, ScriptedSmtp, free_port
from tests.signing_in import SENDER

ROOT = Path(__file__).resolve().parent.parent


class MovableClock:
    """The one clock a test moves: wall time (``datetime.now``, ``time.time``, through
    time-machine) and ``app.clock.monotonic`` go forward together; both keep ticking in between.
    """

    def __init__(self, traveller: time_machine.Traveller) -> None:
        self._traveller = traveller
        self._moved = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self._moved

    def advance(self, seconds: float) -> None:
        self._traveller.shift(seconds)
        self._moved += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[MovableClock]:
    """Move time in this process with ``clock.advance(seconds)`` instead of sleeping.

    Processes a test starts (uvicorn, arq workers) keep the real clock (see ``app/clock.py``).
    """
    with time_machine.travel(datetime.now(UTC), tick=True) as traveller:
        moving = MovableClock(traveller)
        monkeypatch.setattr(app_clock, "monotonic", moving.monotonic)
        yield moving


#: The database every test gets: "sqlite" (default) or "postgresql" (TEST_DATABASE=postgresql).
BACKEND = os.environ.get("TEST_DATABASE", "sqlite")
_postgres: PostgresServer | None = None


@pytest.fixture(scope="session", autouse=True)
def postgres_server() -> Iterator[PostgresServer | None]:
    """With TEST_DATABASE=postgresql, a private PostgreSQL for the whole run."""
    global _postgres
    if BACKEND != "postgresql":
        yield None
        return
    _postgres = PostgresServer(free_port())
    _postgres.start()
    yield _postgres
    _postgres.stop()
    _postgres = None


def postgres() -> PostgresServer | None:
    """The run's private PostgreSQL (``None`` on SQLite)."""
    return _postgres


def fresh_database_url(tmp_path: Path) -> str:
    """A new, empty database for one test: a SQLite file, or a PostgreSQL database."""
    if _postgres is None:
        return f"sqlite+aiosqlite:///{tmp_path / 'convites.db'}"
    return _postgres.create_database(f"t_{uuid.uuid4().hex[:16]}")


_migrated_sqlite: Path | None = None


def migrate(settings: Settings) -> None:
    """Bring a test's new, empty database to the migrations' head. On SQLite the real Alembic
    migrations build one database per run, and each test gets a copy of that file: a run of
    the migrations costs ~0.3 s, and ~400 tests ask for one. PostgreSQL runs them each time.
    The migrations themselves are tested step by step in ``tests/test_migrations.py``."""
    global _migrated_sqlite
    if _postgres is not None:
        upgrade(settings)
        return
    path = make_url(settings.database_url).database
    assert path, settings.database_url
    if _migrated_sqlite is None:
        folder = Path(tempfile.mkdtemp(prefix="convites-migrated-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        template = folder / "convites.db"
        upgrade(replace(settings, database_url=f"sqlite+aiosqlite:///{template}"))
        _migrated_sqlite = template
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_migrated_sqlite, path)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"), free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own (no persistence), to stop and start again."""
    folder = tmp_path / "redis"
    folder.mkdir()
    server = RedisServer(folder, free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def smtp_server() -> Iterator[ScriptedSmtp]:
    server = ScriptedSmtp(free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def smtp(smtp_server: ScriptedSmtp) -> ScriptedSmtp:
    smtp_server.reset()
    return smtp_server


@pytest.fixture
async def redis(redis_server: RedisServer) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_server.url)
    await client.flushall()
    yield client
    await client.aclose()


def make_settings(tmp_path: Path, redis_url: str, smtp_port: int, **overrides: Any) -> Settings:
    env = {
        "APP_ENV": "test",
        "DATABASE_URL": fresh_database_url(tmp_path),
        "REDIS_URL": redis_url,
        "SMTP_URL": f"smtp://127.0.0.1:{smtp_port}?timeout=5",
        "SECRET_KEY": "test-secret-key-that-is-long-enough",
        "RETRY_BACKOFF_SECONDS": "0.2,0.2,0.2",
        "SENDING_LEASE_SECONDS": "120",
        "WORKER_HEARTBEAT_SECONDS": "1",
        "SLOW_AFTER_SECONDS": "30",
        "RETURN_PATH": "devolucoes@convites.exemplo",
        "BOUNCE_LISTEN": f"127.0.0.1:{free_port()}",
        "ALLOWED_HOSTS": "testserver",
        # Most tests look at /saude and /metrics right after a change: no snapshot there
        # (tests/test_status_snapshots.py checks the snapshot itself).
        "STATUS_SNAPSHOT_SECONDS": "0",
        # Test receivers listen on 127.0.0.1 over http (tests/webhook_receiver.py); the guard's
        # own tests turn this off (tests/test_webhooks.py).
        "WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",
    }
    env.update({key: str(value) for key, value in overrides.items()})
    return load_settings(env)


def short_lease_settings(
    tmp_path: Path, redis_url: str, smtp_port: int, **overrides: Any
) -> Settings:
    """Migrated settings whose leases and timeouts are short enough for process tests: a job a
    killed worker held is free again after 18 s (arq's lock: the longest job timeout + 10 s)."""
    short = {
        "SENDING_LEASE_SECONDS": 4,
        "SMTP_URL": f"smtp://127.0.0.1:{smtp_port}?timeout=2",
        "WEBHOOK_TIMEOUT_SECONDS": 1,
    }
    settings = make_settings(tmp_path, redis_url, smtp_port, **{**short, **overrides})
    migrate(settings)
    return settings


@pytest.fixture
def settings(
    tmp_path: Path, redis: Redis, redis_server: RedisServer, smtp: ScriptedSmtp
) -> Settings:
    settings = make_settings(tmp_path, redis_server.url, smtp.port)
    migrate(settings)
    return settings


@pytest.fixture
async def db(settings: Settings) -> AsyncIterator[Database]:
    database = Database(settings.database_url)
    yield database
    await database.dispose()


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[Any]:
    """The ASGI app with its lifespan entered, as uvicorn would run it; without the start-up
    warm-up of the live read (a server's first burst needs it, one test does not:
    ``tests/test_live_feed.py`` tests it; the real processes the tests start do warm up)."""
    app = create_app(settings, warm_up=False)
    async with app.router.lifespan_context(app) as state:

        async def with_state(scope: Scope, receive: Receive, send: Send) -> None:
            scope["state"] = dict(state or {})
            await app(scope, receive, send)

        yield with_state


def app_client(
    settings: Settings, smtp: ScriptedSmtp | None = None, email: str | None = None
) -> AbstractAsyncContextManager[httpx.AsyncClient]:
    """A browser of its own (its own cookie jar) talking to a running app; with ``smtp`` and
    ``email``, signed in as that address through the real link mail (``tests.signing_in``)."""
    if smtp is None or email is None:
        return client_for(settings)
    return client_for(settings, smtp=smtp, email=email)


@pytest.fixture
async def client(settings: Settings, smtp: ScriptedSmtp) -> AsyncIterator[httpx.AsyncClient]:
    """A browser signed in as ``SENDER``."""
    async with app_client(settings, smtp, SENDER) as http:
        yield http


@pytest.fixture
async def anonymous_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A browser nobody signed in on."""
    async with app_client(settings) as http:
        yield http


@pytest.fixture
def other_client(settings: Settings, smtp: ScriptedSmtp) -> Any:
    """A factory for another person's browser (own cookie jar, own account) on the same app."""
    count = iter(range(1, 1000))
    return lambda: app_client(settings, smtp, f"outra{next(count)}@exemplo.com")


def _at_start_up_only(job: CronJob) -> CronJob:
    """A cron as a burst run should meet it: its start-up run, if it has one, and no other (its
    schedule moved to midnight of a 29 February). arq queues a cron due within the next second,
    and a burst worker runs every job queued: a drain near a cron's second waited for it, and
    for the one after (a second or three, one drain in five), and a drain at half past an hour
    would have run the retention purge."""
    never_near = {"month": {2}, "day": {29}, "hour": {0}, "minute": {0}, "second": {0}}
    return replace(job, weekday=None, **never_near)


async def drain(
    settings: Settings, worker_class: type[Worker] = Worker, **overrides: Any
) -> Worker:
    """Run an in-process worker until the queue is empty (arq's own testing pattern), with the
    crons' start-up runs only."""
    options = worker_options(settings)
    options["cron_jobs"] = [_at_start_up_only(job) for job in options["cron_jobs"]]
    options.update(overrides)
    worker = worker_class(burst=True, handle_signals=False, **options)
    try:
        await asyncio.wait_for(worker.async_run(), 30)
    finally:
        await worker.close()
    return worker


@pytest.fixture
async def bounce_port(settings: Settings, tmp_path: Path) -> AsyncIterator[int]:
    """The bounce receiver (real aiosmtpd, this test's database and Redis); its port."""
    async with bounce_receiver(settings, spool=tmp_path / "bounces-spool") as port:
        yield port


def with_smtp_timeout(settings: Settings, seconds: float) -> Settings:
    smtp: SmtpSettings = replace(settings.smtp, timeout=seconds)
    return replace(settings, smtp=smtp)


def process_env(settings: Settings, **extra: str) -> dict[str, str]:
    """Environment for real `arq`/`uvicorn` child processes with these settings."""
    env = dict(os.environ)
    env.update(
        {
            "APP_ENV": settings.app_env,
            "DATABASE_URL": settings.database_url,
            "REDIS_URL": settings.redis_url,
            "SMTP_URL": f"smtp://{settings.smtp.host}:{settings.smtp.port}?timeout={settings.smtp.timeout}",
            "SECRET_KEY": settings.secret_key,
            "RETRY_BACKOFF_SECONDS": ",".join(str(s) for s in settings.retry_backoff_seconds),
            "SENDING_LEASE_SECONDS": str(settings.sending_lease_seconds),
            "WORKER_HEARTBEAT_SECONDS": str(settings.worker_heartbeat_seconds),
            "WORKER_GRACE_SECONDS": str(settings.worker_grace_seconds),
            "SLOW_AFTER_SECONDS": str(settings.slow_after_seconds),
            "HTTPS_ONLY_COOKIES": str(settings.https_only_cookies).lower(),
            "TRUST_PROXY_HEADERS": str(settings.trust_proxy_headers).lower(),
            "MAX_BODY_BYTES": str(settings.max_body_bytes),
            "SENDS_PER_SENDER_PER_MINUTE": str(settings.sends_per_sender_per_minute),
            "SENDS_PER_ADDRESS_PER_MINUTE": str(settings.sends_per_address_per_minute),
            "SENDS_PER_SENDER_PER_DAY": str(settings.sends_per_sender_per_day),
            "SENDS_PER_HOUR": str(settings.sends_per_hour),
            "SENDER_SHARE_OF_HOUR_PERCENT": str(settings.sender_share_of_hour_percent),
            "STREAMS_PER_SENDER": str(settings.streams_per_sender),
            "ALARM_PENDING_SECONDS": str(settings.alarm_pending_seconds),
            "ALARM_CHECK_SECONDS": str(settings.alarm_check_seconds),
            "RETURN_PATH": settings.return_path,
            "BOUNCE_LISTEN": ":".join(str(part) for part in settings.bounce_listen),
            "ALLOWED_HOSTS": ",".join(settings.allowed_hosts),
            "STREAMS_PER_ADDRESS": str(settings.streams_per_address),
            "STREAMS_PER_PROCESS": str(settings.streams_per_process),
            "STREAM_MAX_SECONDS": str(settings.stream_max_seconds),
            "STATUS_SNAPSHOT_SECONDS": str(settings.status_snapshot_seconds),
            "SIGNIN_LINKS_PER_CLIENT_PER_HOUR": str(settings.signin_links_per_client_per_hour),
            "SIGNIN_LINKS_PER_ADDRESS_PER_HOUR": str(settings.signin_links_per_address_per_hour),
            "INVITE_TTL_SECONDS": str(settings.invite_ttl_seconds),
            "BATCH_MAX_ROWS": str(settings.batch_max_rows),
            "BATCH_REVIEWS_PER_MINUTE": str(settings.batch_reviews_per_minute),
            "BATCH_ANNOUNCE_SECONDS": str(settings.batch_announce_seconds),
            "WEBHOOK_ALLOW_PRIVATE_NETWORKS": str(settings.webhook_allow_private_networks).lower(),
            "WEBHOOK_RETRY_BACKOFF_SECONDS": ",".join(
                str(s) for s in settings.webhook_retry_backoff_seconds
            ),
            "WEBHOOK_MAX_FAILURES": str(settings.webhook_max_failures),
            "WEBHOOK_TIMEOUT_SECONDS": str(settings.webhook_timeout_seconds),
            "PYTHONPATH": str(ROOT),
        }
    )
    if settings.ops_token is not None:
        env["OPS_TOKEN"] = settings.ops_token
    env.update(extra)
    return env
