"""Load generators: wrk (C, one thread, keep-alive) for throughput, httpx for paced requests.

wrk writes its result as one JSON line from a Lua ``done`` hook, so nothing depends on the
layout of its human-readable report. The CPU time wrk itself used is measured too: if the
client saturates a core, the figure is the client's, not the server's.
"""

from __future__ import annotations

import json
import resource
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench.procs import cpu_seconds

_DONE = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, "max_us": %d,' ..
    ' "errors": %d, "non_2xx_3xx": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency.max, e.connect + e.read + e.write + e.timeout, e.status))
end
"""

_LIMIT = r"""
local served = 0
response = function(status, headers, body)
  served = served + 1
  if served >= %d then wrk.thread:stop() end
end
"""


def _lua_string(value: str) -> str:
    return json.dumps(value)  # a JSON string literal is a valid Lua string literal here


#: In a body, replaced by the request's number: every invite goes to a new address (a sender
#: inviting the same address again gets 409, and one address gets few invites a day).
NUMBER = "__N__"

_NUMBERED = r"""
local number = 0
local template = wrk.body
request = function()
  number = number + 1
  return wrk.format(nil, nil, nil, (string.gsub(template, "__N__", tostring(number))))
end
"""


@dataclass(frozen=True)
class Request:
    """One request wrk repeats: method, path, headers and body (``NUMBER`` in it is numbered)."""

    method: str
    path: str
    headers: dict[str, str]
    body: str = ""

    def body_for(self, number: int) -> str:
        return self.body.replace(NUMBER, str(number))


@dataclass(frozen=True)
class WrkResult:
    rps: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    requests: int
    errors: int
    non_2xx_3xx: int
    client_cpu: float  # share of one core wrk used
    server_cpu: float  # share of one core the server used

    @property
    def client_bound(self) -> bool:
        return self.client_cpu > 0.9


def _children_cpu() -> float:
    # Only wrk is reaped while it runs, so the growth of the children's CPU time is wrk's.
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


def _script(request: Request, limit: int | None) -> str:
    # Each wrk run numbers from 1 again: a fresh tag keeps runs of one request apart.
    body = request.body.replace(NUMBER, f"{uuid.uuid4().hex[:6]}-{NUMBER}")
    lines = [
        f"wrk.method = {_lua_string(request.method)}",
        f"wrk.body = {_lua_string(body)}",
    ]
    lines += [
        f"wrk.headers[{_lua_string(k)}] = {_lua_string(v)}" for k, v in request.headers.items()
    ]
    if NUMBER in request.body:
        lines.append(_NUMBERED)
    if limit is not None:
        lines.append(_LIMIT % limit)
    lines.append(_DONE)
    return "\n".join(lines)


def run_wrk(
    base_url: str,
    request: Request,
    *,
    seconds: float,
    connections: int = 50,
    server_pid: int | None = None,
    limit: int | None = None,
    until: Callable[[], bool] | None = None,
) -> WrkResult:
    """Run wrk against ``base_url + request.path``.

    ``limit`` stops sending after that many answers; ``until`` (polled) ends the run early.
    """
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(_script(request, limit))
        script = handle.name
    args = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "10s"]
    args += ["-s", script, base_url + request.path]
    server_before = cpu_seconds(server_pid) if server_pid else 0.0
    began = time.monotonic()
    children_before = _children_cpu()
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = began + seconds + 30
    while process.poll() is None and time.monotonic() < deadline:
        if until is not None and until():
            # wrk keeps its duration even when every thread stopped; SIGINT ends it cleanly
            # (it still prints its summary).
            process.send_signal(signal.SIGINT)
            break
        time.sleep(0.1)
    try:
        stdout, stderr = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
    wall = time.monotonic() - began
    client_cpu = _children_cpu() - children_before
    Path(script).unlink(missing_ok=True)
    server_cpu = (cpu_seconds(server_pid) - server_before) / wall if server_pid else 0.0
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({process.returncode}): {stderr.strip()} {stdout[-500:]}")
    data = json.loads(lines[-1])
    duration = data["duration_us"] / 1e6
    return WrkResult(
        rps=data["requests"] / duration if duration else 0.0,
        p50_ms=data["p50_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        max_ms=data["max_us"] / 1000,
        requests=data["requests"],
        errors=data["errors"],
        non_2xx_3xx=data["non_2xx_3xx"],
        client_cpu=client_cpu / wall,
        server_cpu=server_cpu,
    )


def run_wrk_all(
    base_urls: list[str],
    request: Request,
    *,
    seconds: float,
    server_pids: list[int],
    limit: int | None = None,
    until: Callable[[], bool] | None = None,
) -> WrkResult:
    """One wrk per web process, all at once, each with 50 connections (and its share of
    ``limit``), summed: throughput, requests and errors add up, the server CPU is the sum of the
    processes' shares of one core, the client CPU that of every wrk together, and each latency
    figure is the slower process's (two percentiles cannot be merged exactly)."""
    if len(base_urls) == 1:
        return run_wrk(
            base_urls[0],
            request,
            seconds=seconds,
            server_pid=server_pids[0],
            limit=limit,
            until=until,
        )
    share = None if limit is None else -(-limit // len(base_urls))
    began, children_before = time.monotonic(), _children_cpu()
    with ThreadPoolExecutor(len(base_urls)) as pool:
        runs = [
            pool.submit(
                run_wrk, url, request, seconds=seconds, server_pid=pid, limit=share, until=until
            )
            for url, pid in zip(base_urls, server_pids, strict=True)
        ]
        results = [run.result() for run in runs]
    wall = time.monotonic() - began
    return WrkResult(
        rps=sum(r.rps for r in results),
        p50_ms=max(r.p50_ms for r in results),
        p99_ms=max(r.p99_ms for r in results),
        max_ms=max(r.max_ms for r in results),
        requests=sum(r.requests for r in results),
        errors=sum(r.errors for r in results),
        non_2xx_3xx=sum(r.non_2xx_3xx for r in results),
        client_cpu=(_children_cpu() - children_before) / wall,
        server_cpu=sum(r.server_cpu for r in results),
    )
