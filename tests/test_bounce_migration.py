"""The bounces migration (0004) goes down and up again on both databases."""

from __future__ import annotations

from pathlib import Path

from alembic import command

from app.storage.migrate import alembic_config, upgrade
from tests.fixtures import make_settings


def test_the_bounces_migration_is_reversible(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, "redis://127.0.0.1:1/0", 1)
    upgrade(settings)
    config = alembic_config(settings.database_url)

    command.downgrade(config, "0003")
    command.upgrade(config, "head")
