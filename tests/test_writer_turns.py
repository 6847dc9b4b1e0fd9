"""SQLite writers' turns (``app.storage.database.WriterTurns``): bounded, fair, and never a thread
that cannot
be woken, so a process (or a test run) with a writer still waiting exits at once."""

from __future__ import annotations

import asyncio
import fcntl
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.storage import database as db_module
from app.storage.database import WriterTurns

ROOT = Path(__file__).resolve().parent.parent


def hold_lock(path: Path) -> int:
    """Another process's view: an open file description that holds the write lock."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


async def test_a_writer_that_never_gets_its_turn_gives_up_and_holds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db_module, "TURN_TIMEOUT_SECONDS", 0.5)
    database = tmp_path / "convites.db"
    holder = hold_lock(Path(f"{database}.writelock"))
    turns = WriterTurns(str(database))
    threads_before = set(threading.enumerate())
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            async with turns.turn():
                pass
        waited = time.monotonic() - started
        # No thread was left blocked (others, from earlier tests, may have ended meanwhile).
        assert set(threading.enumerate()) - threads_before == set()
        # The turnstile was given back: the next writer is not locked out.
        turnstile = os.open(f"{database}.writeturn", os.O_RDWR)
        fcntl.flock(turnstile, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(turnstile)
    finally:
        os.close(holder)
        turns.close()
    assert 0.4 < waited < 5


async def test_turns_alternate_between_two_writers_of_one_file(tmp_path: Path) -> None:
    database = str(tmp_path / "convites.db")
    busy, other = WriterTurns(database), WriterTurns(database)
    stop = asyncio.Event()

    async def busy_writer() -> int:
        turns = 0
        while not stop.is_set():
            async with busy.turn():
                turns += 1
                await asyncio.sleep(0.001)
        return turns

    looping = asyncio.create_task(busy_writer())
    await asyncio.sleep(0.2)
    started = time.monotonic()
    async with other.turn():
        waited = time.monotonic() - started
    stop.set()
    await looping
    busy.close()
    other.close()

    assert waited < 0.5, f"the second writer waited {waited:.2f} s for one turn"


SHUTDOWN_SCRIPT = """
import asyncio, fcntl, os, sys
sys.path.insert(0, {root!r})
from app.storage.database import WriterTurns

database = {database!r}
holder = os.open(database + ".writelock", os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(holder, fcntl.LOCK_EX)  # another writer that never lets go

async def main():
    turns = WriterTurns(database)
    async def write():
        async with turns.turn():
            pass
    asyncio.ensure_future(write())
    await asyncio.sleep(0.3)  # the write is now waiting for its turn

asyncio.run(main())
print("exited")
"""


def test_a_process_whose_writer_is_still_waiting_exits_at_once(tmp_path: Path) -> None:
    script = SHUTDOWN_SCRIPT.format(root=str(ROOT), database=str(tmp_path / "convites.db"))
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "exited", result.stderr
    assert time.monotonic() - started < 20
