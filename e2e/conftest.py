"""Browser tests use the same real services as the fast tests (redis-server, SMTP, SQLite)."""

from tests.conftest import *  # noqa: F403
