"""The Alembic migrations are the only way tables are built, and they match the models."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import create_async_engine

from app.storage.migrate import alembic_config, upgrade
from app.storage.tables import metadata
from tests.fixtures import make_settings


def _diff(database_url: str) -> list[Any]:
    def compare(conn: Connection) -> list[Any]:
        with warnings.catch_warnings():
            # SQLite's reflection skips an index on an expression (ix_invites_sender_email), so
            # autogenerate cannot compare it there; PostgreSQL's run does, and the query plans
            # (tests/test_query_plans.py) show SQLite searching it.
            warnings.filterwarnings("ignore", "Skipped unsupported reflection of expression")
            warnings.filterwarnings("ignore", "autogenerate skipping metadata-specified expression")
            return list(compare_metadata(MigrationContext.configure(conn), metadata))

    async def run() -> list[Any]:
        engine = create_async_engine(database_url)
        async with engine.connect() as conn:
            diff = await conn.run_sync(compare)
        await engine.dispose()
        return diff

    return asyncio.run(run())


def test_migrations_build_exactly_the_tables_the_code_uses(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, "redis://127.0.0.1:1/0", 1)
    upgrade(settings)

    assert _diff(settings.database_url) == []


def test_migrating_twice_is_harmless(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, "redis://127.0.0.1:1/0", 1)
    upgrade(settings)
    upgrade(settings)


def _rows(database_url: str, query: str) -> list[Any]:
    async def run() -> list[Any]:
        engine = create_async_engine(database_url)
        async with engine.begin() as conn:
            result = await conn.execute(text(query))
            rows = list(result.all()) if result.returns_rows else []
        await engine.dispose()
        return rows

    return asyncio.run(run())


def test_accounts_leave_anonymous_rows_as_they_were_and_migrate_back(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, "redis://127.0.0.1:1/0", 1)
    upgrade(settings, "0002")
    _rows(
        settings.database_url,
        "INSERT INTO invites (public_id, sender_id, email, status, attempt, round_first_attempt,"
        " created_at, updated_at, correlation_id) VALUES ('antigo', 'cookie-sem-conta',"
        " 'ana@exemplo.com', 'enviado', 1, 1, '2026-01-01 00:00:00', '2026-01-01 00:00:00', 'c')",
    )

    upgrade(settings)
    assert _rows(
        settings.database_url,
        "SELECT public_id, sender_id, status, kind, sender_email FROM invites",
    ) == [("antigo", "cookie-sem-conta", "enviado", "convite", None)]

    command.downgrade(alembic_config(settings.database_url), "0002")
    assert _rows(settings.database_url, "SELECT public_id, sender_id FROM invites") == [
        ("antigo", "cookie-sem-conta")
    ]
    upgrade(settings)  # and forward again
    assert _diff(settings.database_url) == []


def test_sessions_from_before_0009_get_an_id_each_and_stay_live(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, "redis://127.0.0.1:1/0", 1)
    upgrade(settings, "0008")
    url = settings.database_url
    _rows(
        url,
        "INSERT INTO accounts (public_id, email, created_at, updated_at) VALUES"
        " ('conta', 'a@exemplo.com', '2026-01-01 00:00:00', '2026-01-01 00:00:00')",
    )
    for n in (1, 2):
        _rows(
            url,
            "INSERT INTO sessions (token_hash, account_id, created_at, expires_at) SELECT"
            f" '{n:064d}', id, '2026-01-0{n} 00:00:00', '2099-01-01 00:00:00' FROM accounts",
        )

    upgrade(settings)
    rows = _rows(url, "SELECT public_id, created_at, last_used_at, revoked_at FROM sessions")
    assert len({row[0] for row in rows}) == 2 and all(len(row[0]) >= 16 for row in rows)
    assert all(row[1] == row[2] and row[3] is None for row in rows)

    command.downgrade(alembic_config(url), "0008")
    assert len(_rows(url, "SELECT token_hash FROM sessions")) == 2
    upgrade(settings)
    assert _diff(url) == []
