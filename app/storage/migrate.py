"""Apply the Alembic migrations (``python -m app migrate``): the only way tables are built."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from app.config import Settings

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(settings: Settings, revision: str = "head") -> None:
    """Bring the database at ``settings.database_url`` up to ``revision``."""
    if settings.database_url.startswith("sqlite"):
        from sqlalchemy.engine import make_url

        path = make_url(settings.database_url).database
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(settings.database_url), revision)
