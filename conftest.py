"""The fixtures every test folder shares (real Redis, SMTP, databases) come from one plugin,
``tests/fixtures.py``; ``e2e/conftest.py`` adds the browser's. No test imports a conftest."""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.fixtures"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long tests first: with a few pytest processes per pass (pytest-xdist), one left for the
    end makes the whole pass wait on it alone."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
