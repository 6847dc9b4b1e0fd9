"""One bench run's services: a private redis-server and SMTP sink for the whole run, and a
fresh database, web processes and workers for each scenario (one of each on SQLite; the
PostgreSQL run, ``bench.postgres``, starts two of each)."""

from __future__ import annotations

import itertools
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
from arq.worker import Worker
from redis import Redis

from app.config import Settings, load_settings
from app.sending.worker import worker_options
from app.storage.migrate import upgrade
from bench import procs
from bench.client import BrowserSession, open_sessions
from bench.load import Request, WrkResult, run_wrk_all


def parse_db_time(value: str | datetime | None) -> float | None:
    """A stored UTC datetime as a Unix timestamp: SQLite keeps it as naive text, PostgreSQL
    (through asyncpg) hands back an aware datetime."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    return datetime.fromisoformat(value).replace(tzinfo=UTC).timestamp()


@dataclass
class Stack:
    folder: Path
    redis_port: int = field(default_factory=procs.free_port)
    smtp_port: int = field(default_factory=procs.free_port)
    processes: list[procs.Proc] = field(default_factory=list)
    startups: dict[str, list[float]] = field(default_factory=dict)
    rss: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    webs: int = 1  # web processes per scenario, each on its own port
    workers: int = 1  # worker processes per scenario (of whichever settings are asked for)
    #: The plain INSERT baseline's name in the accept scenario (``bench.app``'s /bench/insert).
    plain_insert = "sqlite3 insert"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        for proc, port in (
            (procs.redis_server(self.folder, self.redis_port), self.redis_port),
            (procs.smtp_sink(self.folder, self.smtp_port), self.smtp_port),
        ):
            self.processes.append(proc.start())
            proc.wait_ready(port=port)

    def stop(self) -> None:
        for proc in reversed(self.processes):
            proc.stop()
        self.processes.clear()

    def versions(self) -> dict[str, str]:
        """The database's version, for the report."""
        return {"sqlite": sqlite3.sqlite_version}

    def env(self, name: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "APP_ENV": "test",
                "DATABASE_URL": f"sqlite+aiosqlite:///{self.folder / name / 'convites.db'}",
                "REDIS_URL": self.redis_url,
                "SMTP_URL": f"smtp://127.0.0.1:{self.smtp_port}?timeout=10",
                "SECRET_KEY": "bench-secret-key-long-enough-0123456789",
                "CONVITES_VAR_DIR": str(self.folder / name),
                "SLOW_AFTER_SECONDS": "30",
                # A benchmark is one sender at machine speed: lift the abuse limits (they are
                # measured by tests/test_rate_limits.py, not here).
                "SENDS_PER_SENDER_PER_MINUTE": "100000000",
                "SENDS_PER_ADDRESS_PER_MINUTE": "100000000",
                "SENDS_PER_SENDER_PER_DAY": "100000000",
                "STREAMS_PER_SENDER": "100000",
                "INVITES_PER_RECIPIENT_PER_DAY": "100000000",
                "SIGNIN_LINKS_PER_CLIENT_PER_HOUR": "100000000",
                "STREAMS_PER_ADDRESS": "100000",
                "STREAMS_PER_PROCESS": "100000",
                # The domain's hourly budget (5,000 by default) would defer the rest of a
                # 10,000-invite backlog by an hour.
                "SENDS_PER_HOUR": "100000000",
            }
        )
        return env

    def fresh_database(self, name: str) -> tuple[dict[str, str], Settings]:
        env = self.env(name)
        (self.folder / name).mkdir(parents=True, exist_ok=True)
        settings = load_settings(env)
        # Alembic's async env runs its own event loop: give it a thread of its own.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(upgrade, settings).result()
        Redis.from_url(self.redis_url).flushall()
        return env, settings

    def _place(self, name: str, kind: str, index: int, count: int) -> tuple[Path, str]:
        """Where one of ``count`` processes keeps its log, and its label in the RSS table."""
        if count == 1:
            return self.folder / name, name
        folder = self.folder / name / f"{kind}{index}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder, f"{name}/{kind}{index}"

    @contextmanager
    def _group(
        self,
        key: str,
        name: str,
        count: int,
        launch: Callable[[Path], procs.Proc],
        ready: Callable[[procs.Proc], None],
    ) -> Iterator[list[procs.Proc]]:
        """``count`` processes, all launched before the first is waited for; stopped at the end
        (the RSS of each noted first)."""
        with ExitStack() as running:
            started = []
            for index in range(count):
                folder, label = self._place(name, "web" if key == "web" else "w", index, count)
                proc = launch(folder).start()
                running.callback(proc.stop)
                started.append((proc, label))
            for proc, _label in started:
                ready(proc)
                self._note(proc, key)
            yield [proc for proc, _label in started]
            for proc, label in started:
                self.rss.setdefault(key, []).append((f"{label} after", procs.rss_mb(proc.pid)))

    @contextmanager
    def web(self, env: dict[str, str], name: str) -> Iterator[WebHandle]:
        def launch(folder: Path) -> procs.Proc:
            port = procs.free_port()
            proc = procs.web(folder, env, port)
            proc.extra["port"] = port
            return proc

        def ready(proc: procs.Proc) -> None:
            proc.wait_ready(port=int(proc.extra["port"]))

        with self._group("web", name, self.webs, launch, ready) as started:
            urls = [f"http://127.0.0.1:{int(proc.extra['port'])}" for proc in started]
            yield WebHandle(started, urls, env, self.folder / "links.txt")

    @contextmanager
    def worker(
        self,
        env: dict[str, str],
        name: str,
        settings_path: str = "app.sending.worker.WorkerSettings",
    ) -> Iterator[procs.Proc]:
        """``self.workers`` worker processes of ``settings_path``; yields the first of them."""
        key = "worker" if settings_path.startswith("app.") else "noop worker"
        text = "worker started" if key == "worker" else "Starting worker"
        with self._group(
            key,
            name,
            self.workers,
            lambda folder: procs.worker(folder, env, settings_path),
            lambda proc: proc.wait_ready(text=text),
        ) as started:
            yield started[0]

    def _note(self, proc: procs.Proc, key: str | None = None) -> None:
        key = key or proc.name
        self.startups.setdefault(key, []).append(proc.started_in)
        self.rss.setdefault(key, []).append(("ready", proc.rss_ready))


@dataclass
class WebHandle:
    """The scenario's web processes; with more than one, the bench's own requests go to each
    in turn and wrk loads all of them at once."""

    processes: list[procs.Proc]
    base_urls: list[str]
    env: dict[str, str]
    links: Path

    @property
    def proc(self) -> procs.Proc:
        return self.processes[0]

    @property
    def base_url(self) -> str:
        return self.base_urls[0]

    def rss_mb(self) -> float:
        return sum(procs.rss_mb(proc.pid) for proc in self.processes)

    def wrk(
        self,
        request: Request,
        *,
        seconds: float,
        limit: int | None = None,
        until: Callable[[], bool] | None = None,
    ) -> WrkResult:
        return run_wrk_all(
            self.base_urls,
            request,
            seconds=seconds,
            server_pids=[proc.pid for proc in self.processes],
            limit=limit,
            until=until,
        )

    def http(self, **kwargs: object) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
        if len(self.base_urls) > 1:
            kwargs["transport"] = _InTurn([int(p.extra["port"]) for p in self.processes], limits)
        return httpx.AsyncClient(base_url=self.base_url, timeout=30, limits=limits, **kwargs)  # type: ignore[arg-type]

    async def sessions(self, count: int) -> list[BrowserSession]:
        """``count`` new senders, each signed in by the link in its mail (an in-process burst
        worker sends the links, so no scenario's own worker needs to be running yet)."""
        clients = [self.http() for _ in range(count)]
        try:
            return await open_sessions(clients, self.links, self._deliver)
        finally:
            for client in clients:
                await client.aclose()

    async def session(self) -> BrowserSession:
        return (await self.sessions(1))[0]

    async def _deliver(self) -> None:
        options = worker_options(load_settings(self.env))
        worker = Worker(burst=True, handle_signals=False, **options)
        try:
            await worker.async_run()
        finally:
            await worker.close()


class _InTurn(httpx.AsyncBaseTransport):
    """Each request to the next web process's port in turn, as a balancer in front would."""

    def __init__(self, ports: list[int], limits: httpx.Limits) -> None:
        self.ports = itertools.cycle(ports)
        self.inner = httpx.AsyncHTTPTransport(limits=limits)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(port=next(self.ports))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def db_rows(settings: Settings, query: str, *params: object) -> list[tuple[object, ...]]:
    """Rows of one read-only query (``?`` placeholders), on SQLite or PostgreSQL."""
    if not settings.database_url.startswith("sqlite"):
        from bench.postgres import pg_rows  # it imports this module

        return pg_rows(settings.database_url, query, *params)
    path = settings.database_url.split("///", 1)[1]
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute(query, params).fetchall()
    finally:
        conn.close()


def wait_until(predicate: object, timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(interval)
    return False
