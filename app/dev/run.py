"""``python -m app dev``: the whole app for one person on one machine.

A private ``redis-server``, the migrations, then the dev mailbox, the bounce receiver, the web
and one worker as children supervised by ``app.dev.supervisor``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from app import clock
from app.config import VAR_DIR, load_settings
from app.dev.supervisor import Supervisor
from app.storage.migrate import upgrade


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Until ``port`` answers; a child that exits fails at once, a slow machine gets a minute."""
    deadline = clock.monotonic() + timeout
    while clock.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listened on port {port} after {timeout}s")


def _redis(children: Supervisor, var: Path) -> str:
    redis_server = shutil.which("redis-server")
    if redis_server is None:
        raise SystemExit(
            "redis-server is not installed. On Debian/Ubuntu: apt-get install -y redis-server "
            "(elsewhere, install Redis 6+ and put redis-server on PATH)."
        )
    data = var / "redis"
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    process = children.start(
        "redis-server",
        [
            redis_server,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--dir",
            str(data.resolve()),
            "--appendonly",
            "yes",
            "--save",
            "",
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ],
        dict(os.environ),
        stopped_last=True,
    )
    wait_for_port(port, process)
    return f"redis://127.0.0.1:{port}/0"


#: The dev mailbox is local: a short SMTP timeout lets QA see a ``lento…@`` invite turn
#: ``incerto`` within seconds (the mailbox never answers it).
DEV_SMTP_TIMEOUT_SECONDS = 5


def dev_ops_token(env: dict[str, str]) -> str | None:
    """The operator token for the local person: the one given, or a fresh one each run so
    ``/operacao`` opens under ``make run``; never outside development (the page stays off
    there unless OPS_TOKEN is set, and always needs the token)."""
    if env.get("APP_ENV") != "development":
        return env.get("OPS_TOKEN") or None
    return env.get("OPS_TOKEN") or secrets.token_urlsafe(24)


def run_dev(host: str, port: int) -> int:
    """Run every part until Ctrl-C; return the exit code."""
    var = VAR_DIR.resolve()
    var.mkdir(parents=True, exist_ok=True)
    children = Supervisor(how_to_start=f"kill -USR1 {os.getpid()}  (dev starts the worker again)")
    stopping = False
    worker_wanted = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    def on_start_worker(signum: int, _frame: object) -> None:
        nonlocal worker_wanted
        worker_wanted = True

    # A closed terminal (SIGHUP) stops everything too: Redis, in a session of its own, would
    # not hear it.
    for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop, on_signal)
    signal.signal(signal.SIGUSR1, on_start_worker)
    try:
        env = dict(os.environ)
        env.setdefault("APP_ENV", "development")
        env["REDIS_URL"] = _redis(children, var)
        mail_port = free_port()
        env["SMTP_URL"] = f"smtp://127.0.0.1:{mail_port}?timeout={DEV_SMTP_TIMEOUT_SECONDS}"
        ops_token = dev_ops_token(env)
        if ops_token:
            env["OPS_TOKEN"] = ops_token
        env["MAILBOX_DIR"] = str(var / "caixa")
        env.setdefault("PUBLIC_URL", f"http://{host}:{port}")
        # A webhook receiver on this machine (http://localhost:…) is the usual one in dev.
        env.setdefault("WEBHOOK_ALLOW_PRIVATE_NETWORKS", "true")
        settings = load_settings(env)
        upgrade(settings)
        python = sys.executable
        mailbox = children.start(
            "mailbox",
            [python, "-m", "app", "mailbox", "--dir", env["MAILBOX_DIR"], "--port", str(mail_port)],
            env,
        )
        wait_for_port(mail_port, mailbox)
        # The mailbox's "Simular devolução" sends its reports here.
        bounce_port = free_port()
        env["BOUNCE_LISTEN"] = f"127.0.0.1:{bounce_port}"
        bounces = children.start("bounces", [python, "-m", "app", "bounces"], env)
        wait_for_port(bounce_port, bounces)
        web = children.start(
            "web",
            [
                python,
                "-m",
                "uvicorn",
                "app.main:app",
                "--no-proxy-headers",
                "--host",
                host,
                "--port",
                str(port),
            ],
            env,
        )
        worker = children.start("worker", [python, "-m", "app", "worker"], env, stoppable=True)
        wait_for_port(port, web)
        print(
            f"\nConvites is running: http://{host}:{port}/\n"
            f"Sent mail (dev mailbox): http://{host}:{port}/caixa\n"
            + (
                f"Operator page: http://{host}:{port}/operacao  token: {ops_token}\n"
                if ops_token
                else ""
            )
            + f"The worker is pid {worker.pid}: stop it with kill {worker.pid}, start it again "
            f"with kill -USR1 {os.getpid()}.\n"
            "Press Ctrl-C to stop everything.\n",
            flush=True,
        )
        while not stopping:
            if worker_wanted:
                worker_wanted = False
                children.request_start("worker")
            time.sleep(0.2)
            if not stopping:  # Ctrl-C reaches the children too: that is not a crash
                children.check()
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        children.stop_all()
