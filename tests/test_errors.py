"""An internal error: a pt-BR answer with no internals; the details in the log, correlated."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from sqlalchemy import text

from app.config import Settings
from app.logs import JsonFormatter
from app.storage.database import Database
from app.storage.tables import invites, metadata
from tests.helpers import client_for
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
