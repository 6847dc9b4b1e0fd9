"""What a screen-reader user hears: a virtual screen reader's phrase log, in Chromium.

The vendored ``@guidepup/virtual-screen-reader`` (``e2e/vendor/virtual-screen-reader/``) and
``spoken.js`` go into every page as an init script (``listen``; ``e2e/conftest.py`` does it for
every context). Init scripts are not subject to the page's Content-Security-Policy, so the app's
real policy stays in force. From DOMContentLoaded on, the reader logs what a person hears:

- a focus move, as the focused control is read: ``"textbox, E-mail, required"``;
- a live region's announcement: ``"polite: …"`` (``role=status``), ``"assertive: …"``
  (``role=alert``), once per task with the region's last text (see ``spoken.js``).

Usage::

    page.get_by_label("E-mail").focus()
    start_listening(page)            # optional: forget what was heard so far
    page.get_by_label("E-mail").press("Enter")
    wait_for_spoken(page, assertive(EMAIL_REQUIRED))      # polls the log in the page
    assert spoken(page) == [
        f"textbox, E-mail, {EMAIL_REQUIRED}, invalid, required",  # focus, with its error
        assertive(EMAIL_REQUIRED),
    ]
    read_through(page, "main")       # the reading order, start to end (focus does not move)

``spoken`` is everything heard since the page's document loaded (or since the last
``start_listening``), so a reload that repeats nothing is ``spoken(page) == []``.
"""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import BrowserContext, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

VENDOR = Path(__file__).parent / "vendor" / "virtual-screen-reader"
READER_FILE = VENDOR / "virtual-screen-reader-0.33.0.iife.js"
SCRIPT = READER_FILE.read_text() + "\n" + (Path(__file__).parent / "spoken.js").read_text()


def polite(text: str) -> str:
    """How a ``role=status`` (or ``aria-live=polite``) region's announcement is logged."""
    return f"polite: {text}"


def assertive(text: str) -> str:
    """How a ``role=alert`` (or ``aria-live=assertive``) region's announcement is logged."""
    return f"assertive: {text}"


def listen(context: BrowserContext) -> None:
    """Every page of ``context`` listens with the virtual screen reader from its first load."""
    context.add_init_script(SCRIPT)


def _wait_started(page: Page, timeout: float = 10_000) -> None:
    page.wait_for_function(
        "() => !!(window.__ouvinte && window.__ouvinte.started)", timeout=timeout
    )


def start_listening(page: Page) -> None:
    """Make sure the reader listens on the page's current document, and start its log afresh.

    A page of a context without ``listen`` gets the reader now (``evaluate`` is not subject to
    the page's CSP either)."""
    if not page.evaluate("() => !!window.__ouvinte"):
        page.evaluate(SCRIPT)
    _wait_started(page)
    page.evaluate("() => { window.__ouvinte.mark = window.__ouvinte.heard().length; }")


def spoken(page: Page) -> list[str]:
    """Every phrase heard on the page since it loaded (or since ``start_listening``), in order."""
    _wait_started(page)
    phrases = page.evaluate("() => window.__ouvinte.heard().slice(window.__ouvinte.mark || 0)")
    return [str(phrase) for phrase in phrases]


def wait_for_spoken(page: Page, phrase: str, timeout: float = 10_000) -> list[str]:
    """Poll the log until ``phrase`` was heard; the log so far, or an AssertionError with it."""
    _wait_started(page, timeout)
    try:
        page.wait_for_function(
            "p => window.__ouvinte.heard().slice(window.__ouvinte.mark || 0).includes(p)",
            arg=phrase,
            timeout=timeout,
        )
    except PlaywrightTimeoutError:
        raise AssertionError(f"never heard {phrase!r}; heard: {spoken(page)}") from None
    return spoken(page)


def read_through(page: Page, selector: str = "main") -> list[str]:
    """The reading order of the element at ``selector``: every phrase a person hears reading it
    from its start to its end (``"main"``, ``"heading, …, level 1"``, …, ``"end of main"``).
    Focus does not move and the ``spoken`` log is left alone."""
    _wait_started(page)
    phrases = page.evaluate("selector => window.__ouvinte.readThrough(selector)", selector)
    return [str(phrase) for phrase in phrases]


def print_spoken(page: Page) -> None:
    """While developing: print what was heard on ``page``, one phrase a line (``pytest -s``;
    ``PRINT_SPOKEN=1`` prints it for every page a test leaves open)."""
    print(f"\nheard on {page.url}:")
    for phrase in spoken(page):
        print(f"  {phrase!r}")
