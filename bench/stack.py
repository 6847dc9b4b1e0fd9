"""One bench run's services: a private redis-server and SMTP sink for the whole run, and a
fresh database, web process and worker for each scenario."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
from arq.worker import Worker
from redis import Redis

from app.config import Settings, load_settings
from app.migrate import upgrade
from app.worker import worker_options
from bench import procs
from bench.client import BrowserSession, open_sessions


def parse_db_time(value: str | None) -> float | None:
    """A stored UTC datetime (SQLite keeps it naive) as a Unix timestamp."""
    if value is None:
        return None
    return datetime.fromisoformat(value).replace(tzinfo=UTC).timestamp()


@dataclass
class Stack:
    folder: Path
    redis_port: int = field(default_factory=procs.free_port)
    smtp_port: int = field(default_factory=procs.free_port)
    processes: list[procs.Proc] = field(default_factory=list)
    startups: dict[str, list[float]] = field(default_factory=dict)
    rss: dict[str, list[tuple[str, float]]] = field(default_factory=dict)

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

    @contextmanager
    def web(self, env: dict[str, str], name: str) -> Iterator[WebHandle]:
        port = procs.free_port()
        proc = procs.web(self.folder / name, env, port).start()
        try:
            proc.wait_ready(port=port)
            self._note(proc)
            yield WebHandle(proc, f"http://127.0.0.1:{port}", env, self.folder / "links.txt")
            self.rss.setdefault("web", []).append((f"{name} after", procs.rss_mb(proc.pid)))
        finally:
            proc.stop()

    @contextmanager
    def worker(
        self, env: dict[str, str], name: str, settings_path: str = "app.worker.WorkerSettings"
    ) -> Iterator[procs.Proc]:
        proc = procs.worker(self.folder / name, env, settings_path).start()
        key = "worker" if settings_path.startswith("app.") else "noop worker"
        try:
            proc.wait_ready(text="Starting worker" if key != "worker" else "worker started")
            self._note(proc, key)
            yield proc
            self.rss.setdefault(key, []).append((f"{name} after", procs.rss_mb(proc.pid)))
        finally:
            proc.stop()

    def _note(self, proc: procs.Proc, key: str | None = None) -> None:
        key = key or proc.name
        self.startups.setdefault(key, []).append(proc.started_in)
        self.rss.setdefault(key, []).append(("ready", proc.rss_ready))


@dataclass
class WebHandle:
    proc: procs.Proc
    base_url: str
    env: dict[str, str]
    links: Path

    def http(self, **kwargs: object) -> httpx.AsyncClient:
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
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


def db_rows(settings: Settings, query: str, *params: object) -> list[tuple[object, ...]]:
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
