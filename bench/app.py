"""The real app plus two baseline endpoints, served by the same process (bench only).

``/bench/hello`` is the floor of the stack (routing, middleware, HTTP); ``/bench/insert`` is one
plain ``sqlite3`` INSERT per request, committed with the same durability as the app
(WAL, ``synchronous=FULL``), in the handler. On PostgreSQL (``DATABASE_URL`` postgresql) it is
one INSERT per request through a plain asyncpg pool of at most as many connections as the app's
pool keeps (10), each its own committed transaction in the app's database. The
accept path is measured against both.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
from sqlalchemy.engine import make_url
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from app.config import load_settings
from app.main import create_app


def _plain_db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS plain_invites"
        " (id INTEGER PRIMARY KEY, email TEXT NOT NULL, created_at REAL NOT NULL)"
    )
    return conn


Insert = Callable[[str], Awaitable[int]]


def _sqlite_insert(database: str) -> Insert:
    plain = _plain_db(Path(database).with_name("plain.db"))

    async def insert(email: str) -> int:
        plain.execute("BEGIN IMMEDIATE")
        cursor = plain.execute(
            "INSERT INTO plain_invites (email, created_at) VALUES (?, ?)", (email, time.time())
        )
        plain.execute("COMMIT")
        return int(cursor.lastrowid or 0)

    return insert


def _postgres_insert(url: str) -> Insert:
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    pool: list[asyncpg.Pool] = []
    opening = asyncio.Lock()

    async def ready() -> asyncpg.Pool:
        async with opening:
            if not pool:
                created = await asyncpg.create_pool(dsn, min_size=1, max_size=10)
                async with created.acquire() as conn, conn.transaction():
                    # Two web processes start at once: one creates the table, the other waits.
                    await conn.execute("SELECT pg_advisory_xact_lock(7013)")
                    await conn.execute(
                        "CREATE TABLE IF NOT EXISTS plain_invites (id bigserial PRIMARY KEY,"
                        " email text NOT NULL, created_at double precision NOT NULL)"
                    )
                pool.append(created)
        return pool[0]

    async def insert(email: str) -> int:
        connections = pool[0] if pool else await ready()
        return int(
            await connections.fetchval(
                "INSERT INTO plain_invites (email, created_at) VALUES ($1, $2) RETURNING id",
                email,
                time.time(),
            )
        )

    return insert


def create_bench_app() -> Starlette:
    settings = load_settings()
    app = create_app(settings)
    if settings.database_url.startswith("sqlite"):
        plain = _sqlite_insert(make_url(settings.database_url).database or "bench.db")
    else:
        plain = _postgres_insert(settings.database_url)

    async def hello(request: Request) -> Response:
        return PlainTextResponse("hello")

    async def insert(request: Request) -> Response:
        data = json.loads(await request.body())
        return JSONResponse({"id": await plain(data["email"])}, status_code=202)

    app.router.routes[0:0] = [
        Route("/bench/hello", hello, methods=["GET"]),
        Route("/bench/insert", insert, methods=["POST"]),
    ]
    return app
