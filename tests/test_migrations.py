"""The Alembic migrations are the only way tables are built, and they match the models."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from app.migrate import upgrade
from app.models import metadata
from tests.fixtures import make_settings


def _diff(database_url: str) -> list[Any]:
    def compare(conn: Connection) -> list[Any]:
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
