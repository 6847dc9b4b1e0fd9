"""Real services the tests start and control: redis-server, an SMTP server, app processes."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections import deque
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP

from tests.waiting import POLL_SECONDS, until

#: Debian's Chromium (or CHROMIUM_PATH), and the flags it needs here (no sandbox, no background
#: network).
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


#: The ports each pass of ``make test`` hands out (``TEST_PORTS=low-high`` overrides). Both
#: passes run at once, so each has a block of its own, and both blocks lie below Linux's
#: ephemeral range (32768-60999), from which every outgoing connection takes its local port: a
#: port handed out here stays free until the server it is meant for binds it, not taken
#: meanwhile by a client's connection or by the other pass. Each of a pass's test processes
#: (pytest-xdist) takes its own share of the block, for the same reason.
PORT_BLOCKS = {"sqlite": (20000, 25999), "postgresql": (26000, 31999)}


def _port_block() -> range:
    spec = os.environ.get("TEST_PORTS")
    if spec:
        low, high = (int(part) for part in spec.split("-"))
    else:
        low, high = PORT_BLOCKS.get(os.environ.get("TEST_DATABASE", "sqlite"), (20000, 25999))
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if worker and workers:  # "gw0", "gw1"…: one share each
        share = (high - low + 1) // int(workers)
        low += int(worker.removeprefix("gw")) * share
        high = low + share - 1
    ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range")
    if ephemeral.exists():
        first, last = (int(part) for part in ephemeral.read_text().split())
        if low <= last and first <= high:
            raise RuntimeError(
                f"the test ports {low}-{high} overlap this machine's ephemeral ports "
                f"{first}-{last}: set TEST_PORTS=low-high outside them"
            )
    return range(low, high + 1)


_BLOCK = _port_block()
_next_port = itertools.cycle(
    itertools.chain(_BLOCK[(start := random.randrange(len(_BLOCK))) :], _BLOCK[:start])
)
_ports_lock = threading.Lock()


def free_port() -> int:
    """A port nothing listens on, from this pass's block; each is handed out once per lap of
    the block, so a test never gets a port an earlier test's server may still hold."""
    with _ports_lock:
        for _ in range(len(_BLOCK)):
            port = next(_next_port)
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    raise RuntimeError(f"no free port in {_BLOCK.start}-{_BLOCK.stop - 1}")


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def wait_for_port(port: int, timeout: float = 15.0) -> None:
    until(lambda: port_open(port), timeout, f"something listening on {port}")


def _postgres_bin() -> Path:
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not candidates:
        raise RuntimeError("PostgreSQL is not installed (apt-get install -y postgresql)")
    return candidates[-1].parent


class PostgresServer:
    """A private PostgreSQL cluster (initdb + pg_ctl) in a temp dir, on a free port.

    PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres` user.
    The tests run it without fsync; the bench (``fsync=True``) with PostgreSQL's default
    durability, as SQLite's ``synchronous=FULL`` is there.
    """

    def __init__(self, port: int, *, fsync: bool = False) -> None:
        self.port = port
        self.fsync = fsync
        self.folder = Path(tempfile.mkdtemp(prefix="convites-pg-"))
        self.bin = _postgres_bin()

    @property
    def base_url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}"

    def _run(self, *args: str) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        data = self.folder / "data"
        self._run(
            "initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"
        )
        self.start_server()

    def restart(self) -> None:
        """Stop the server (every connection is cut) and start it again on the same data."""
        self.stop_server()
        self.start_server()

    def stop_server(self) -> None:
        """Stop the server, keeping its data (``start_server`` brings it back)."""
        self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop")

    def start_server(self) -> None:
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 "
            f"-c fsync={'on' if self.fsync else 'off'} -c max_connections=300"
        )
        data, log = str(self.folder / "data"), str(self.folder / "log")
        self._run("pg_ctl", "-D", data, "-o", options, "-l", log, "-w", "start")

    def create_database(self, name: str) -> str:
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        return f"{self.base_url}/{name}"

    def stop(self) -> None:
        """Stop the server and delete the cluster. Immediate: nothing in it is kept. The files
        of every test's database (a few hundred each) are deleted in the background: that took
        most of a minute, at the end of the pass."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop")
        subprocess.Popen(["rm", "-rf", str(self.folder)], start_new_session=True)


class RedisServer:
    """The real redis-server binary on a free port; it can be stopped and started again."""

    def __init__(self, folder: Path, port: int) -> None:
        self.folder = folder
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
        self.process = subprocess.Popen(
            [
                binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dir",
                str(self.folder),
                "--save",
                "",
                "--appendonly",
                "no",
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
        )
        wait_for_port(self.port)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


@dataclass
class Received:
    rcpt_tos: list[str]
    content: bytes
    peer: Any = None  # the client's (host, port): one per SMTP connection
    mail_from: str = ""  # the envelope sender (MAIL FROM)
    mail_options: list[str] = field(default_factory=list)
    rcpt_options: list[str] = field(default_factory=list)

    @property
    def message(self) -> EmailMessage:
        parsed = message_from_bytes(self.content, policy=policy.default)
        assert isinstance(parsed, EmailMessage)
        return parsed

    @property
    def text(self) -> str:
        """The plain-text part as a mail reader shows it (MIME's CRLF line ends as newlines)."""
        body = self.message.get_body(("plain",))
        assert body is not None
        return body.get_content().replace("\r\n", "\n")


@dataclass
class _Script:
    data_replies: deque[str] = field(default_factory=deque)
    default_reply: str = "250 2.0.0 OK"
    stalled: bool = False
    stall_at: str = "data"  # or "rcpt": before any of the message is handed over
    data_seconds: float = 0.0  # each DATA takes this long (a slow but working server)
    received: list[Received] = field(default_factory=list)
    data_started: int = 0
    held: int = 0  # sessions waiting in a stall right now


_DSN_MAIL = ("RET=", "ENVID=")
_DSN_RCPT = ("NOTIFY=", "ORCPT=")


def _split_dsn(arg: str, names: tuple[str, ...]) -> tuple[str, list[str]]:
    words = arg.split(" ")
    dsn = [w for w in words if w.upper().startswith(names)]
    return " ".join(w for w in words if w not in dsn), dsn


class _DsnSmtp(SMTP):
    """aiosmtpd offering DSN (RFC 3461): it advertises it and takes its MAIL/RCPT parameters,
    which plain aiosmtpd refuses with 555. The parameters land in the envelope's options."""

    async def push(self, status: Any) -> None:
        if status == "250 HELP":  # the last line of the EHLO answer
            await super().push("250-DSN")
        await super().push(status)

    async def smtp_MAIL(self, arg: str) -> None:
        arg, dsn = _split_dsn(arg or "", _DSN_MAIL)
        await super().smtp_MAIL(arg)
        if self.envelope is not None and self.envelope.mail_from:
            self.envelope.mail_options.extend(dsn)

    async def smtp_RCPT(self, arg: str) -> None:
        arg, dsn = _split_dsn(arg or "", _DSN_RCPT)
        before = len(self.envelope.rcpt_tos) if self.envelope is not None else 0
        await super().smtp_RCPT(arg)
        if self.envelope is not None and len(self.envelope.rcpt_tos) > before:
            self.envelope.rcpt_options.extend(dsn)


class _DsnController(Controller):  # type: ignore[misc]
    def factory(self) -> SMTP:
        return _DsnSmtp(self.handler, **self.SMTP_kwargs)


class ScriptedSmtp:
    """aiosmtpd, answering DATA with scripted replies (250, 4xx, 5xx) or stalling on demand."""

    def __init__(self, port: int, *, dsn: bool = False) -> None:
        self.port = port
        self.script = _Script()
        self.lock = threading.Lock()
        controller = _DsnController if dsn else Controller
        self.controller = controller(self, hostname="127.0.0.1", port=port)

    def start(self) -> None:
        self.controller.start()

    def stop(self) -> None:
        self.script.stalled = False
        self.controller.stop()

    def reset(self) -> None:
        with self.lock:
            self.script = _Script()

    def reply_next(self, *replies: str) -> None:
        """The next DATA commands get these replies, in order; then the default."""
        with self.lock:
            self.script.data_replies.extend(replies)

    def always(self, reply: str) -> None:
        with self.lock:
            self.script.default_reply = reply

    def slow(self, seconds: float) -> None:
        """Each DATA from now on takes ``seconds`` before its reply (a slow, working server)."""
        self.script.data_seconds = seconds

    def stall(self, on: bool = True, at: str = "data") -> None:
        self.script.stall_at = at
        self.script.stalled = on

    @property
    def received(self) -> list[Received]:
        with self.lock:
            return list(self.script.received)

    @property
    def data_started(self) -> int:
        return self.script.data_started

    @property
    def held(self) -> int:
        """Sessions stalled right now (at the ``stall`` step), waiting for the test."""
        return self.script.held

    async def _hold(self, step: str) -> None:
        """While the test stalls ``step``, the session waits here (the test releases it from
        its own thread: a flag to look at, there is no event to share across the loops)."""
        script = self.script
        if not (script.stalled and script.stall_at == step):
            return
        with self.lock:
            script.held += 1
        try:
            while script.stalled and script.stall_at == step:
                await asyncio.sleep(POLL_SECONDS)
        finally:
            with self.lock:
                script.held -= 1

    def take_mail_to(self, email: str) -> Received:
        """Take the newest mail to ``email`` out of the record (and its DATA out of the count):
        the sign-in helper's link mail, which the test itself is not about."""
        with self.lock:
            for index in range(len(self.script.received) - 1, -1, -1):
                if email in self.script.received[index].rcpt_tos:
                    self.script.data_started -= 1
                    return self.script.received.pop(index)
        raise AssertionError(f"no mail to {email}")

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: Any
    ) -> str:
        await self._hold("rcpt")
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        script = self.script
        with self.lock:
            script.data_started += 1
        await self._hold("data")
        if script.data_seconds:
            await asyncio.sleep(script.data_seconds)
        with self.lock:
            reply = script.data_replies.popleft() if script.data_replies else script.default_reply
            if reply.startswith("250"):
                script.received.append(
                    Received(
                        list(envelope.rcpt_tos),
                        envelope.original_content,
                        session.peer,
                        envelope.mail_from,
                        list(envelope.mail_options),
                        list(envelope.rcpt_options),
                    )
                )
        return reply


class AppProcess:
    """A real `arq` or `uvicorn` process of the app, with its output in a log file."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.args = args
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @classmethod
    def worker(cls, env: dict[str, str], log_path: Path) -> AppProcess:
        """``python -m app worker``: what dev and the deployment run (it rides out outages)."""
        return cls([sys.executable, "-m", "app", "worker"], env, log_path)

    @classmethod
    def arq_worker(cls, env: dict[str, str], log_path: Path) -> AppProcess:
        """The plain arq CLI on the same settings."""
        return cls(
            [sys.executable, "-m", "arq", "app.sending.worker.WorkerSettings"], env, log_path
        )

    @classmethod
    def bounces(cls, env: dict[str, str], log_path: Path) -> AppProcess:
        """``python -m app bounces``: the bounce receiver on the env's ``BOUNCE_LISTEN``."""
        return cls([sys.executable, "-m", "app", "bounces"], env, log_path)

    @classmethod
    def web(cls, env: dict[str, str], log_path: Path, port: int) -> AppProcess:
        args = [
            sys.executable,
            "-m",
            "uvicorn",
            "app.main:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--timeout-graceful-shutdown",
            "3",
            # Longer than any client's idle expiry (httpx: 5 s), so the client always closes an
            # idle connection first. With equal timers a request can be written into a
            # connection the server is closing, and fail with no response (seen once in CI).
            "--timeout-keep-alive",
            "75",
        ]
        return cls(args, env, log_path)

    def start(self) -> AppProcess:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.args, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def describe(self, tail: int = 4000) -> str:
        """Exit status and the end of the log: what a failing test prints about this process."""
        code = None if self.process is None else self.process.poll()
        state = "running" if code is None else f"exited with {code}"
        return f"--- {self.log_path.name} ({state}) ---\n{self.log()[-tail:]}"

    def wait_for_log(self, text: str, timeout: float = 20.0) -> None:
        def said_or_exited() -> bool:
            return text in self.log() or (
                self.process is not None and self.process.poll() is not None
            )

        until(said_or_exited, timeout, lambda: f"{text!r} in the log:\n{self.log()[-3000:]}")
        if text not in self.log():
            raise RuntimeError(f"process exited ({self.process.returncode}):\n{self.log()}")  # type: ignore[union-attr]

    def stop(self, timeout: float = 20.0) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def __enter__(self) -> AppProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.stop()
        self.kill()
