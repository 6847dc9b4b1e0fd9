"""The fixtures every test folder shares (real Redis, SMTP, databases) come from one plugin,
``tests/fixtures.py``; ``e2e/conftest.py`` adds the browser's. No test imports a conftest."""

pytest_plugins = ["tests.fixtures"]
