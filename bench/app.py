"""The real app plus two baseline endpoints, served by the same process (bench only).

``/bench/hello`` is the floor of the stack (routing, middleware, HTTP); ``/bench/insert`` is one
plain ``sqlite3`` INSERT per request, committed with the same durability as the app
(WAL, ``synchronous=FULL``), in the handler. The accept path is measured against both.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

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


def create_bench_app() -> Starlette:
    settings = load_settings()
    app = create_app(settings)
    database = make_url(settings.database_url).database or "bench.db"
    plain = _plain_db(Path(database).with_name("plain.db"))

    async def hello(request: Request) -> Response:
        return PlainTextResponse("hello")

    async def insert(request: Request) -> Response:
        data = json.loads(await request.body())
        plain.execute("BEGIN IMMEDIATE")
        cursor = plain.execute(
            "INSERT INTO plain_invites (email, created_at) VALUES (?, ?)",
            (data["email"], time.time()),
        )
        plain.execute("COMMIT")
        return JSONResponse({"id": cursor.lastrowid}, status_code=202)

    app.router.routes[0:0] = [
        Route("/bench/hello", hello, methods=["GET"]),
        Route("/bench/insert", insert, methods=["POST"]),
    ]
    return app
