"""One thread with one synchronous SQLite connection: a whole batch in one hop from the loop.

The async driver (aiosqlite) hops to its thread and back for every statement, and under load
each hop back waits its turn in a busy event loop. A lane runs every group of a batch (BEGIN,
the statements, COMMIT) on its own thread with the standard library's driver, so the loop
awaits one future per batch. ``app.storage.database`` keeps one lane for the group commit and one
for
batched reads.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import Connection, Engine

from app.batching import Groups


def run_groups(conn: Connection, groups: Groups) -> list[Sequence[Any]]:
    """Every group's synchronous operation on ``conn``, in order: each group's outcomes."""
    return [operation(conn, arguments) for operation, arguments in groups]


class SyncLane:
    """Run batches of synchronous operations on ``engine``, one at a time, on one thread."""

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine = engine
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._closed = False

    async def run(self, groups: Groups, *, transaction: bool) -> list[Sequence[Any]]:
        """The batch in one transaction (``transaction``: committed before this returns) or in
        one read snapshot. A cancelled caller of a transaction still waits for the thread to
        finish: whoever holds the write lock for it (``app.storage.database.WriterTurns``) must not
        let go
        while it writes. A cancelled read lets go at once (its thread finishes on its own)."""
        if self._closed:
            raise RuntimeError("the database is closed")
        context = contextvars.copy_context()  # the log's correlation id, for instance
        done = asyncio.get_running_loop().run_in_executor(
            self._thread, context.run, self._run, groups, transaction
        )
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            if transaction:
                await asyncio.wait([done])
            raise

    def _run(self, groups: Groups, transaction: bool) -> list[Sequence[Any]]:
        with self.engine.begin() if transaction else self.engine.connect() as conn:
            return run_groups(conn, groups)

    async def close(self) -> None:
        """Refuse new batches, let those already handed in finish, close the connection on its
        own thread (after them: one thread, first in first out), then stop the thread."""
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(self._thread, self.engine.dispose)
        self._thread.shutdown(wait=False)  # idle by now: nothing can be handed in any more
