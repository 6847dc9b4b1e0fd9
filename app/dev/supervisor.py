"""The child processes of ``python -m app dev``, kept running the way a person expects.

A child that crashes is started again after a doubling backoff, and the restart is printed; a
``stoppable`` child (the worker) a person stopped stays stopped until ``kill -USR1 <dev's pid>``;
``stop_all`` stops every child, newest first, and waits for each: no orphans.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass, field
from typing import TextIO

from app import clock

STOP_TIMEOUT = 30.0
FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 30.0
STABLE_SECONDS = 60.0
#: Exits that mean "someone stopped me": 0 after a handled SIGTERM/SIGINT, or the signal itself.
STOPPED_ON_PURPOSE = frozenset({0, -signal.SIGTERM, -signal.SIGINT})


@dataclass
class Child:
    """One supervised process: how to start it, and what happened to it."""

    name: str
    args: list[str]
    env: dict[str, str]
    stoppable: bool = False
    #: Out of the terminal's process group: Ctrl-C reaches it only through ``stop_all``, last
    #: (Redis: the worker and the web still talk to it while they stop).
    stopped_last: bool = False
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    backoff: float = FIRST_BACKOFF_SECONDS
    restart_at: float | None = None
    stopped: bool = False  # a person stopped it: left alone until ``start``
    restarts: int = field(default=0)


class Supervisor:
    """Children that are restarted when they crash and stopped together, newest first."""

    def __init__(self, out: TextIO | None = None, how_to_start: str = "") -> None:
        self.children: dict[str, Child] = {}
        self.out = out or sys.stdout
        self.how_to_start = how_to_start

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def start(
        self,
        name: str,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        *,
        stoppable: bool = False,
        stopped_last: bool = False,
    ) -> subprocess.Popen[bytes]:
        """Start ``name`` (new, or again with its first arguments)."""
        child = self.children.get(name)
        if child is None:
            assert args is not None and env is not None
            child = self.children[name] = Child(name, args, env, stoppable, stopped_last)
        # A child of our own process group gets the terminal's Ctrl-C too; we still stop each
        # one explicitly so none outlives us when we are stopped by SIGTERM.
        child.process = subprocess.Popen(  # noqa: S603 (our own argv)
            child.args, env=child.env, start_new_session=child.stopped_last
        )
        child.started_at = clock.monotonic()
        child.stopped = False
        child.restart_at = None
        return child.process

    def request_start(self, name: str) -> None:
        """A person asked for ``name`` again (dev's SIGUSR1 for the worker)."""
        child = self.children.get(name)
        if child is None:
            return
        if child.process is not None and child.process.poll() is None:
            self.say(f"{name} is already running (pid {child.process.pid}).")
            return
        self.start(name)
        self.say(f"{name} started again (pid {child.process.pid if child.process else '?'}).")

    def check(self) -> None:
        """Notice exits and start whatever is due; call it often (it never blocks)."""
        now = clock.monotonic()
        for child in self.children.values():
            if child.restart_at is not None and now >= child.restart_at:
                child.restarts += 1
                self.start(child.name)
                self.say(f"{child.name} restarted (restart #{child.restarts}).")
                continue
            code = None if child.process is None else child.process.poll()
            if code is None or child.stopped or child.restart_at is not None:
                continue
            self._exited(child, code, now)

    def _exited(self, child: Child, code: int, now: float) -> None:
        if child.stoppable and code in STOPPED_ON_PURPOSE:
            child.stopped = True
            self.say(
                f"\n{child.name} was stopped ({_describe(code)}) and stays stopped: nothing is "
                "being sent; new invites wait as pendente and the page says sending is paused."
                f"\nTo start it again: {self.how_to_start}\n"
            )
            return
        if now - child.started_at >= STABLE_SECONDS:
            child.backoff = FIRST_BACKOFF_SECONDS
        child.restart_at = now + child.backoff
        self.say(
            f"{child.name} crashed ({_describe(code)}); restarting it in {child.backoff:g} s.",
        )
        child.backoff = min(child.backoff * 2, MAX_BACKOFF_SECONDS)

    def stop_all(self) -> None:
        for child in reversed(list(self.children.values())):
            process = child.process
            if process is None:
                continue
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.say(f"{child.name} did not stop in {STOP_TIMEOUT:.0f}s; killing it")
                process.kill()
                process.wait()


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
