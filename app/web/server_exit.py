"""Tell the open streams when the server is stopping, so each one ends and its response completes.

uvicorn waits for open responses before it runs the lifespan's shutdown, so the live hub's own
``close`` comes too late for the streams: they must end first. One watcher per web process
looks twice a second at the two places a stopping uvicorn says so: sse-starlette's
``AppStatus.should_exit`` (set by its patch of uvicorn's signal handler, which importing
``sse_starlette`` installs, and which the on-call page's stream relies on too), and, should that
patch not be in place, the ``should_exit`` of the uvicorn server behind the SIGTERM handler.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

from sse_starlette.sse import AppStatus

POLL_SECONDS = 0.5


def server_is_exiting() -> bool:
    if AppStatus.should_exit:
        return True
    server = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    return bool(getattr(server, "should_exit", False))


async def watch(on_exit: Callable[[], None], poll_seconds: float = POLL_SECONDS) -> None:
    """Call ``on_exit`` once, when the server starts stopping."""
    # Polled: neither flag has anything to wait on.
    while not server_is_exiting():  # noqa: ASYNC110
        await asyncio.sleep(poll_seconds)
    on_exit()
