"""What a user would build instead (bench only): the same flow, the obvious way.

``POST /convites`` (JSON) writes the invite in one SQLAlchemy transaction of its own and then
calls arq's ``enqueue_job``, once per request; ``bench.naive_worker`` (arq's default settings)
claims, sends one message per SMTP connection and records ``enviado``, a transaction each. The
same durability as the app (SQLite WAL, ``synchronous=FULL``), no guards (no session, CSRF or
rate limit), no group commit, no outbox. ``uvicorn bench.naive_app:app``, configured by
``NAIVE_DATABASE_URL`` and ``REDIS_URL``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from arq import create_pool
from arq.connections import RedisSettings
from sqlalchemy import Column, DateTime, Integer, MetaData, String, Table, event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

metadata = MetaData()
naive_invites = Table(
    "naive_invites",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("email", String(320), nullable=False),
    Column("name", String(200)),
    Column("status", String(16), nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("sent_at", DateTime),
)


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def naive_engine() -> AsyncEngine:
    engine = create_async_engine(os.environ["NAIVE_DATABASE_URL"])

    @event.listens_for(engine.sync_engine, "connect")
    def _durable(dbapi_conn: Any, _record: Any) -> None:
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    return engine


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
    engine = naive_engine()
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    redis = await create_pool(RedisSettings.from_dsn(os.environ["REDIS_URL"]))
    try:
        yield {"engine": engine, "redis": redis}
    finally:
        await redis.aclose()
        await engine.dispose()


async def create(request: Request) -> Response:
    data = await request.json()
    async with request.state.engine.begin() as conn:
        result = await conn.execute(
            naive_invites.insert().values(
                email=data["email"], name=data.get("nome"), status="pendente", created_at=now()
            )
        )
    invite_id = result.inserted_primary_key[0]
    await request.state.redis.enqueue_job("send_invite", invite_id)
    return JSONResponse({"id": invite_id}, status_code=202)


app = Starlette(routes=[Route("/convites", create, methods=["POST"])], lifespan=lifespan)
