"""An internal error: a pt-BR answer with no internals; the details in the log, correlated."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from app.config import Settings
from app.logs import JsonFormatter
from app.storage.database import Database, unavailable
from app.storage.tables import invites, metadata
from tests.fixtures import BACKEND, postgres
from tests.helpers import api_headers, client_for
from tests.services import ScriptedSmtp

REQUEST_ID = "teste-erro-interno-1"


class _Lines(logging.Handler):
    """Formats each record as it is emitted, as the JSON log handler in production does."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter("web"))
        self.lines: list[dict[str, object]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


@pytest.fixture
def log_lines() -> Iterator[_Lines]:
    handler = _Lines()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


async def _break_the_database(db: Database) -> None:
    """Drop ``invites`` and every table that refers to it (PostgreSQL refuses otherwise)."""
    doomed = [
        table
        for table in reversed(metadata.sorted_tables)
        if table is invites or any(key.column.table is invites for key in table.foreign_keys)
    ]
    async with db.write() as conn:
        for table in doomed:
            await conn.execute(text(f"DROP TABLE {table.name}"))


@pytest.mark.parametrize("accept", ["application/json", "text/html"])
async def test_an_internal_error_is_a_pt_br_500_without_internals_and_logged_with_its_id(
    settings: Settings, db: Database, log_lines: _Lines, accept: str, smtp: ScriptedSmtp
) -> None:
    async with client_for(settings, smtp=smtp, raise_app_exceptions=False) as browser:
        await _break_the_database(db)
        response = await browser.get(
            "/convites", headers={"Accept": accept, "X-Request-ID": REQUEST_ID}
        )

    assert response.status_code == 500
    assert "Algo deu errado do nosso lado" in response.text
    for internal in ("Traceback", "sqlite", "OperationalError", "invites", "SELECT"):
        assert internal not in response.text
    assert response.headers["x-request-id"] == REQUEST_ID
    assert response.headers["content-security-policy"]
    [logged] = [line for line in log_lines.lines if line["message"] == "unhandled error"]
    assert logged["correlation_id"] == REQUEST_ID
    assert "invites" in str(logged["exception"])  # the missing table, named in the log only


class _PostgresError(Exception):
    """What asyncpg's errors carry, through SQLAlchemy's adaptation: their SQLSTATE."""

    def __init__(self, message: str, sqlstate: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("orig", "expected"),
    [
        (_PostgresError("the database system is shutting down", "57P03"), True),
        (_PostgresError("connection failure", "08006"), True),
        (_PostgresError('relation "invites" does not exist', "42P01"), False),
        (sqlite3.OperationalError("database is locked"), True),
        (sqlite3.OperationalError("no such table: invites"), False),
    ],
)
def test_a_database_that_cannot_be_reached_is_told_apart_from_a_failed_statement(
    orig: Exception, expected: bool
) -> None:
    assert unavailable(OperationalError("SELECT 1", {}, orig)) is expected


def test_a_connection_refused_while_connecting_is_the_database_being_away() -> None:
    assert unavailable(ConnectionRefusedError(111, "Connect call failed"))
    assert not unavailable(ValueError("a bug"))


async def test_a_database_that_cannot_be_reached_is_a_pt_br_503_that_saved_nothing(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    if BACKEND != "postgresql":
        pytest.skip("a SQLite file is never away; its lock is waited for (busy_timeout)")
    server = postgres()
    assert server is not None
    async with client_for(settings, smtp=smtp, raise_app_exceptions=False) as browser:
        headers = await api_headers(browser)
        server.stop_server()
        try:
            response = await browser.post(
                "/convites", json={"email": "ana@exemplo.com"}, headers=headers
            )
        finally:
            server.start_server()

    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert "Nada foi salvo" in response.json()["erro"]
