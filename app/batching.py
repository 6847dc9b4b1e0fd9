"""Many concurrent callers, one batch at a time: the database's group commit.

One task runs everything waiting, grouped by operation, in one transaction; callers arriving
meanwhile form the next batch, so batches grow with the load and a lone caller waits for nothing.
A result comes only after the commit, so a 202 sent on it still promises a durable row.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

#: One batch, its callers grouped by operation: ``(operation, arguments)`` in order.
Groups = list[tuple[Any, list[Any]]]
#: Runs every group of one batch and returns each group's outcomes, in order.
RunGroups = Callable[[Groups], Awaitable[list[Sequence[Any]]]]


@dataclass
class _Item:
    operation: Any
    argument: Any
    future: asyncio.Future[Any]


def _resolve(item: _Item, outcome: Any) -> None:
    if item.future.done():  # the caller went away (cancelled); the work is done all the same
        return
    if isinstance(outcome, BaseException):
        item.future.set_exception(outcome)
    else:
        item.future.set_result(outcome)


class Batcher:
    """Run concurrent callers' operations in batches, each batch through ``run_groups`` (one
    transaction).

    With ``isolate_failures``, a failed batch reruns each caller alone, so one bad row fails only
    its own caller; without it, every caller of the batch gets the exception.
    """

    def __init__(
        self, run_groups: RunGroups, *, isolate_failures: bool, max_batch: int = 500
    ) -> None:
        self._run_groups = run_groups
        self._isolate_failures = isolate_failures
        self._max_batch = max_batch
        self._waiting: deque[_Item] = deque()
        self._task: asyncio.Task[None] | None = None

    async def submit(self, operation: object, argument: object) -> Any:
        """Hand ``argument`` to ``operation`` in the next batch and return this caller's result."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Item(operation, argument, future))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())
        return await future

    async def close(self) -> None:
        """Wait for the batches already handed in."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def _drain(self) -> None:
        while self._waiting:
            batch = self._next_batch()
            try:
                await self._run_batch(batch)
            except BaseException:
                # Cancelled (the loop is shutting down): nobody may wait for ever.
                for item in (*batch, *self._waiting):
                    item.future.cancel()
                self._waiting.clear()
                raise

    def _next_batch(self) -> list[_Item]:
        return [self._waiting.popleft() for _ in range(min(len(self._waiting), self._max_batch))]

    async def _run_batch(self, batch: list[_Item]) -> None:
        groups: dict[Any, list[_Item]] = {}
        for item in batch:
            groups.setdefault(item.operation, []).append(item)
        try:
            results = await self._run_groups(
                [
                    (operation, [item.argument for item in items])
                    for operation, items in groups.items()
                ]
            )
        except Exception as exc:
            if not self._isolate_failures or len(batch) == 1:
                for item in batch:
                    _resolve(item, exc)
                return
            log.warning("a batch failed; running its callers one by one", extra={"error": str(exc)})
            for item in batch:
                await self._run_batch([item])
            return
        for items, outcomes in zip(groups.values(), results, strict=True):
            for item, outcome in zip(items, outcomes, strict=True):
                _resolve(item, outcome)
