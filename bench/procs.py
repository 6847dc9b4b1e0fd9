"""The real processes a run measures: redis-server, the SMTP sink, uvicorn, arq workers."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def rss_mb(pid: int) -> float:
    """Resident memory of one process, in MiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Proc:
    """One child process with its log file; ``started_in`` is how long it took from its launch
    to be ready (several can be launched before the first is waited for)."""

    name: str
    args: list[str]
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    started_in: float = 0.0
    rss_ready: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)
    launched: float = 0.0

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> Proc:
        self.launched = time.monotonic()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.args, env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT
            )
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(
                f"{self.name} exited ({self.process.returncode}):\n{self.log()[-3000:]}"
            )

    def wait_ready(
        self, *, port: int | None = None, text: str | None = None, timeout: float = 30
    ) -> None:
        began = self.launched or time.monotonic()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            if (port is not None and port_open(port)) or (text is not None and text in self.log()):
                self.started_in = time.monotonic() - began
                self.rss_ready = rss_mb(self.pid)
                return
            time.sleep(0.01)
        raise TimeoutError(f"{self.name} not ready after {timeout}s:\n{self.log()[-3000:]}")

    def stop(self, timeout: float = 20) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None


def redis_server(folder: Path, port: int) -> Proc:
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is missing: run ./scripts/install-system-deps.sh")
    args = [binary, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(folder)]
    args += ["--save", "", "--appendonly", "no", "--loglevel", "warning"]
    return Proc("redis", args, dict(os.environ), folder / "redis.log")


def smtp_sink(folder: Path, port: int) -> Proc:
    args = [sys.executable, "-m", "bench.smtp_sink", str(port), str(folder / "links.txt")]
    return Proc("smtp", args, _pythonpath(dict(os.environ)), folder / "smtp.log")


def web(folder: Path, env: dict[str, str], port: int) -> Proc:
    args = [sys.executable, "-m", "uvicorn", "--factory", "bench.app:create_bench_app"]
    args += ["--host", "127.0.0.1", "--port", str(port), "--loop", "uvloop", "--http", "httptools"]
    args += ["--no-access-log", "--backlog", "2048", "--timeout-graceful-shutdown", "3"]
    return Proc("web", args, _pythonpath(env), folder / "web.log")


def worker(
    folder: Path, env: dict[str, str], settings_path: str = "app.sending.worker.WorkerSettings"
) -> Proc:
    """The app's worker runs as deployed (``python -m app worker``: uvloop, outages ridden out);
    the no-op baseline the same way (``python -m bench.noop_worker``); the naive one through the
    plain arq CLI, as the obvious build would."""
    if settings_path == "app.sending.worker.WorkerSettings":
        args = [sys.executable, "-m", "app", "worker"]
    elif settings_path == "bench.noop_worker.WorkerSettings":
        args = [sys.executable, "-m", "bench.noop_worker"]
    else:
        args = [sys.executable, "-m", "arq", settings_path]
    return Proc("worker", args, _pythonpath(env), folder / f"worker-{settings_path}.log")


def _pythonpath(env: dict[str, str]) -> dict[str, str]:
    env["PYTHONPATH"] = str(ROOT) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    return env


def tool_version(args: list[str]) -> str:
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "missing"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else "?"
