"""The Alembic migrations build exactly the tables ``app.models`` describes."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, create_engine

from app.config import Settings
from app.models import metadata


def test_migrations_match_the_models(settings: Settings) -> None:
    engine = create_engine(settings.database_url.replace("+aiosqlite", ""))

    def diff(conn: Connection) -> list[object]:
        return list(compare_metadata(MigrationContext.configure(conn), metadata))

    with engine.connect() as conn:
        assert diff(conn) == []
    engine.dispose()
