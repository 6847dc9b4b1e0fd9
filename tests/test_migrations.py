"""The Alembic migrations are the only way tables are built, and they match the models."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine

from app.migrate import upgrade
from app.models import metadata
from tests.conftest import make_settings


def test_migrations_build_exactly_the_tables_the_code_uses(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, "redis://127.0.0.1:1/0", 1)
    upgrade(settings)

    engine = create_engine(f"sqlite:///{tmp_path / 'convites.db'}")
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    engine.dispose()

    assert diff == []


def test_migrating_twice_is_harmless(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, "redis://127.0.0.1:1/0", 1)
    upgrade(settings)
    upgrade(settings)
