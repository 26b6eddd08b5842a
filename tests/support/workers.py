"""Real ``nsfleet serve`` processes for integration tests (bound to 127.0.0.1, free ports)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nsfleet.redis_server import free_port


@dataclass
class WorkerProcess:
    env: dict[str, str]
    log_path: Path
    http_port: int = field(default_factory=free_port)
    remoting_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self, timeout: float = 20.0) -> WorkerProcess:
        """Start and wait until ready. A port ``free_port`` chose can be taken before the worker
        binds it (another process of the test, an outgoing connection): the worker then exits
        naming it (or failing to bind it), and is started again on new ports (read ``url`` and
        ``remoting_port`` after this returns)."""
        for _ in range(2):
            try:
                return self._start_once(timeout)
            except RuntimeError as exc:
                if "is taken" not in str(exc) and "address already in use" not in str(exc):
                    raise
                self.http_port, self.remoting_port = free_port(), free_port()
        return self._start_once(timeout)

    def _start_once(self, timeout: float) -> WorkerProcess:
        env = {**os.environ, **self.env, "NSFLEET_HOST": "127.0.0.1",
               "NSFLEET_HTTP_PORT": str(self.http_port),
               "NSFLEET_REMOTING_PORT": str(self.remoting_port)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nsfleet", "serve"], env=env, stdin=subprocess.DEVNULL,
            stdout=self.log_path.open("ab"), stderr=subprocess.STDOUT)
        wait_ready(self.process, self.url, timeout, lambda: self.log_path.read_text())
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout)


@contextlib.contextmanager
def started(env: dict[str, str], log_dir: Path, count: int = 3) -> Iterator[list[WorkerProcess]]:
    """``count`` workers with ``env``, each ready; afterwards every one still running is
    stopped."""
    workers = [WorkerProcess(env, log_dir / f"worker{i}.log") for i in range(count)]
    try:
        for w in workers:
            w.start()
        yield workers
    finally:
        for w in workers:
            if w.process is not None and w.process.poll() is None:
                w.stop()


def wait_ready(process: subprocess.Popen[bytes], url: str, timeout: float,
               log: Callable[[], str]) -> None:
    """Until the worker at ``url`` answers /readyz 200; RuntimeError with the end of ``log()``
    when the process exits first, TimeoutError when ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"worker exited: {log()[-3000:]}")
        try:
            if request("GET", f"{url}/readyz")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"worker not ready: {log()[-3000:]}")


def request(method: str, url: str, body: Any = None, timeout: float = 5.0) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")
