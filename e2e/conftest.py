"""Browser tests against the real thing: redis-server, uvicorn, an arq worker, an SMTP server.

One stack per session (processes take a second or two to start); each test gets a fresh browser
context, so a new sender cookie and its own empty "Meus convites". Every page runs under the
app's real Content-Security-Policy (nothing here loosens or replaces it), and every test drives
Chromium one way: Playwright's sync API, through the ``chromium`` fixture below. A test that
stops the worker or the web gets them back running for the next one (``stack`` fixture).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from app.config import Settings
from app.storage.migrate import upgrade
from e2e.spoken import listen, print_spoken

# The same real Redis and SMTP servers as the fast tests come from the shared plugin
# (tests/fixtures.py, through the root conftest's pytest_plugins).
from tests.fixtures import make_settings, process_env
from tests.services import (
    CHROMIUM,
    CHROMIUM_ARGS,
    AppProcess,
    RedisServer,
    ScriptedSmtp,
    free_port,
    wait_for_port,
)
from tests.signing_in import sign_in_browser
from tests.waiting import until

BATCH_ANNOUNCE_SECONDS = 2  # a batch page's progress, at most this often (e2e/test_batches_…)
RECORDER = (Path(__file__).parent / "recorder.js").read_text()


class Stack:
    """The app's processes, which a test may stop and start again."""

    def __init__(self, folder: Path, settings: Settings) -> None:
        self.folder = folder
        self.settings = settings
        self.port = free_port()
        self.env = process_env(settings)
        self.web = AppProcess.web(self.env, folder / "web.log", self.port)
        self.worker = AppProcess.worker(self.env, folder / "worker.log")

    @classmethod
    def migrated(cls, folder: Path, redis_url: str, smtp_port: int, **overrides: Any) -> Stack:
        """A stack on a fresh, migrated database in ``folder`` (processes not started)."""
        settings = make_settings(folder, redis_url, smtp_port, **overrides)
        # Alembic runs its own event loop; the sync Playwright API may already hold this thread's.
        migration = threading.Thread(target=upgrade, args=(settings,))
        migration.start()
        migration.join(60)
        return cls(folder, settings)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_web(self) -> None:
        self.web.start()
        wait_for_port(self.port)

    def stop_web(self) -> None:
        self.web.stop()

    def start_worker(self) -> None:
        # Each start appends to the same log: wait for one more "worker started" line.
        before = self.worker.log().count("worker started")
        self.worker.start()
        until(
            lambda: self.worker.log().count("worker started") > before,
            what=lambda: f"one more 'worker started':\n{self.worker.log()[-3000:]}",
        )

    def stop_worker(self) -> None:
        self.worker.stop()

    @contextlib.contextmanager
    def running(self) -> Iterator[Stack]:
        """Web and worker started; both stopped afterwards (each waits for its own exit)."""
        try:
            self.start_web()
            self.start_worker()
            yield self
        finally:
            self.worker.__exit__()
            self.web.__exit__()

    def worker_running(self) -> bool:
        process = self.worker.process
        return process is not None and process.poll() is None

    def web_running(self) -> bool:
        process = self.web.process
        return process is not None and process.poll() is None


@pytest.fixture(scope="session")
def stack_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Redis of the stack's own: its worker must never take another test's jobs."""
    server = RedisServer(tmp_path_factory.mktemp("e2e-redis"), free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def running_stack(
    tmp_path_factory: pytest.TempPathFactory, stack_redis: RedisServer, smtp_server: ScriptedSmtp
) -> Iterator[Stack]:
    stack = Stack.migrated(
        tmp_path_factory.mktemp("e2e-stack"),
        stack_redis.url,
        smtp_server.port,
        BATCH_ANNOUNCE_SECONDS=BATCH_ANNOUNCE_SECONDS,
        WORKER_HEARTBEAT_SECONDS=1,
        # Every browser context signs in from 127.0.0.1: the per-network hourly limit is for
        # people, not for a suite (tests/test_rate_limits.py proves it).
        SIGNIN_LINKS_PER_CLIENT_PER_HOUR=1000,
        # One quick retry, then falhou: a failed webhook delivery within seconds
        # (e2e/test_webhooks_in_browser.py).
        WEBHOOK_RETRY_BACKOFF_SECONDS="1",
    )
    with stack.running():
        yield stack


@pytest.fixture
def stack(running_stack: Stack, smtp_server: ScriptedSmtp) -> Iterator[Stack]:
    """The stack, with web and worker running and the SMTP server saying 250."""
    smtp_server.reset()
    if not running_stack.web_running():
        running_stack.start_web()
    if not running_stack.worker_running():
        running_stack.start_worker()
    yield running_stack


# Module scope: Playwright's sync API keeps an event loop running in the main thread while it
# is open, which async tests (pytest-asyncio) in another module cannot share.
@pytest.fixture(scope="module")
def playwright_instance() -> Iterator[Playwright]:
    with sync_playwright() as playwright:
        yield playwright


@pytest.fixture(scope="module")
def chromium(playwright_instance: Playwright) -> Iterator[Browser]:
    browser = playwright_instance.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield browser
    browser.close()


_people = itertools.count(1)


@pytest.fixture
def new_context(
    chromium: Browser, stack: Stack, smtp_server: ScriptedSmtp
) -> Iterator[Callable[..., BrowserContext]]:
    """A factory for browser contexts, closed after the test. Each is a new person, signed in
    through the real sign-in mail and its link (``signed_in=False``: nobody signed in)."""
    contexts: list[BrowserContext] = []

    def make(*, signed_in: bool = True, **options: Any) -> BrowserContext:
        options.setdefault("base_url", stack.url)
        context = chromium.new_context(**options)
        context.set_default_timeout(10_000)
        # Init scripts are not subject to the page's CSP: the app's own policy stays in force.
        # The recorder sees DOM changes (regions never replaced); the virtual screen reader
        # hears what a person hears (e2e/spoken.py).
        context.add_init_script(RECORDER)
        listen(context)
        contexts.append(context)
        if signed_in:
            page = context.new_page()
            sign_in_browser(page, smtp_server, f"pessoa{next(_people)}@exemplo.com")
            page.close()
        return context

    yield make
    for context in contexts:
        if os.environ.get("PRINT_SPOKEN"):  # while developing: hear each page (pytest -s)
            for open_page in context.pages:
                print_spoken(open_page)
        context.close()


@pytest.fixture
def page(new_context: Callable[..., BrowserContext]) -> Page:
    return new_context().new_page()
