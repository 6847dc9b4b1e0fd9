"""Reading a batch in a child process, so that no input can hold the web process.

A worker thread would not do: it shares the interpreter with the event loop, it cannot be
stopped from outside (one row of a sheet is a single call into openpyxl, however many cells it
claims), and whatever memory the reading takes stays in the web process. A child process
answers within ``Bounds.seconds`` (the readers watch the clock between rows) or is killed a
little later; its memory goes with it. At most ``READERS_PER_PROCESS`` children read at once;
more requests wait for one, off the event loop.

The children come from a fork server that has already imported the readers and openpyxl, so
starting one costs milliseconds, and is never forked from the web's own threads.
"""

from __future__ import annotations

import logging
import multiprocessing
import resource
from dataclasses import dataclass
from multiprocessing.connection import Connection

import anyio.to_thread
from anyio import CapacityLimiter

from app import clock
from app.batches.parse import Bounds, OverBound, Row, UnreadableBatch, parse_pasted, parse_upload

log = logging.getLogger(__name__)

#: Children reading at once in one web process; the machine's cores are the web's too.
READERS_PER_PROCESS = 2
#: How long past ``Bounds.seconds`` a child may take to say so itself before it is killed.
GRACE_SECONDS = 2.0

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["app.batches.parse", "openpyxl"])


@dataclass(frozen=True)
class Source:
    """What the person gave: pasted ``text``, or an uploaded file's ``filename`` and ``data``."""

    text: str = ""
    filename: str = ""
    data: bytes | None = None

    @property
    def kind(self) -> str:
        return "pasted" if self.data is None else "file"

    @property
    def what(self) -> str:
        """How a message names it."""
        return "A lista" if self.data is None else "A planilha"

    def read(self, bounds: Bounds) -> list[Row]:
        if self.data is None:
            return parse_pasted(self.text, bounds)
        return parse_upload(self.filename, self.data, bounds)


def _too_big(what: str) -> OverBound:
    return OverBound(
        f"{what} é grande demais para ser lida. Envie só as colunas email e nome.", 413
    )


def _child(sender: Connection, source: Source, bounds: Bounds) -> None:
    """In the child: read, and send back the rows or the refusal (never an exception)."""
    resource.setrlimit(resource.RLIMIT_DATA, (bounds.memory_bytes, bounds.memory_bytes))
    try:
        sender.send(("rows", source.read(bounds)))
    except MemoryError:
        sender.send(("over", str(_too_big(source.what)), 413))
    except OverBound as exc:
        sender.send(("over", str(exc), exc.status))
    except UnreadableBatch as exc:
        sender.send(("unreadable", str(exc), exc.detail))
    finally:
        sender.close()


def _too_slow(bounds: Bounds, what: str) -> OverBound:
    return OverBound(
        f"{what} levou mais de {bounds.seconds:g} segundos para ser lida. Envie um arquivo "
        "menor, só com as colunas email e nome."
    )


def _read_apart(source: Source, bounds: Bounds) -> list[Row]:
    """Blocking: start the child, wait for its answer at most the time bound and the grace."""
    receiver, sender = _CONTEXT.Pipe(duplex=False)
    child = _CONTEXT.Process(target=_child, args=(sender, source, bounds), daemon=True)
    began = clock.monotonic()
    try:
        child.start()
    except BaseException:
        receiver.close()
        raise
    finally:
        sender.close()  # the child holds its own end: EOF here means it is gone
    try:
        log.info("batch read started", extra={"kind": source.kind, "pid": child.pid})
        if not receiver.poll(bounds.seconds + GRACE_SECONDS):
            raise _too_slow(bounds, source.what)
        try:
            outcome = receiver.recv()
        except EOFError:  # it died (out of memory past Python's reach): the input did it
            raise _too_big(source.what) from None
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        child.close()
        receiver.close()
        log.info(
            "batch read finished",
            extra={"kind": source.kind, "seconds": round(clock.monotonic() - began, 3)},
        )
    if outcome[0] == "over":
        raise OverBound(outcome[1], outcome[2])
    if outcome[0] == "unreadable":
        if outcome[2]:
            log.info("batch unreadable", extra={"kind": source.kind, "detail": outcome[2]})
        raise UnreadableBatch(outcome[1], outcome[2])
    rows: list[Row] = outcome[1]
    return rows


async def read_rows(source: Source, bounds: Bounds, readers: CapacityLimiter) -> list[Row]:
    """The rows of ``source``, read in a child process while the event loop serves others.

    Raises ``OverBound`` or ``UnreadableBatch`` with the pt-BR message for the person."""
    # Not abandoned on cancel: a request that goes away still holds its reader until the
    # child is done, so ``readers`` bounds the children, not just the waiting requests.
    return await anyio.to_thread.run_sync(_read_apart, source, bounds, limiter=readers)
