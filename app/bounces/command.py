"""``python -m app bounces``: run the receiver until SIGTERM or Ctrl-C."""

from __future__ import annotations

import asyncio
import signal

from app.bounces.receiver import serve_forever
from app.config import Settings
from app.logs import configure_logging


def run_receiver(settings: Settings) -> int:
    configure_logging("bounces")

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await serve_forever(settings, stop)

    asyncio.run(main())
    return 0
