"""``nsfleet serve --processes N``: N worker processes sharing the HTTP and remoting ports, under
a small supervisor (this module, the parent process; it serves nothing itself).

* Each child is a whole worker (``python -m nsfleet serve`` with the same settings, passed as
  ``NSFLEET_*`` variables, and ``--processes 1``): its own Redis connections, route cache and
  change-feed subscription, presence id and expiry sweep, exactly as N workers on N hosts.
  Each binds the ports with SO_REUSEPORT, so the kernel spreads new connections across them
  (Linux >= 3.9 balances by a hash of the connection; where the option is missing, as on
  Windows, ``--processes`` above 1 is refused; macOS and the BSDs accept it but do not balance
  TCP connections evenly).
* With the embedded Redis, the supervisor owns the redis-server (started first, stopped last)
  and the children use it by URL; it restarts the server on the same port when it exits
  (nsfleet.embedded), and stops the group, exit 1, when the server keeps exiting. When another
  worker already runs the data directory's Redis, the group joins it instead and leaves it to
  that owner.
* A child that exits while the group runs is restarted in its slot (backoff from 0.5 s to 10 s
  while it keeps failing at once). More than ``CRASH_LIMIT`` exits within ``CRASH_WINDOW``
  seconds: the supervisor stops the others and exits 1.
* SIGTERM or SIGINT: forwarded as SIGTERM to every child, which drains as one worker does
  (drain_timeout); a child still running ``KILL_GRACE`` seconds after that is killed. Exit 0
  when every child exited 0.
* On Linux each child gets SIGTERM if the supervisor dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, fields
from pathlib import Path
from types import FrameType

import structlog

from nsfleet.config import Settings, env_name
from nsfleet.embedded import EmbeddedRedis, EmbeddedRedisDied, _die_with_parent
from nsfleet.process_group import COUNT_ENV, DIR_ENV, INDEX_ENV

log = structlog.get_logger("nsfleet.supervisor")

CRASH_LIMIT = 5  # exits within CRASH_WINDOW seconds before the supervisor gives up
CRASH_WINDOW = 60.0
BACKOFF_FIRST, BACKOFF_MAX = 0.5, 10.0  # seconds before restarting a child that exited
STABLE_AFTER = 30.0  # a child that ran this long restarts at once (its backoff resets)
KILL_GRACE = 10.0  # seconds past drain_timeout before a child that does not stop is killed
POLL = 0.05


class SupervisorError(RuntimeError):
    pass


def reuse_port_supported() -> bool:
    return hasattr(socket, "SO_REUSEPORT")


def child_environ(settings: Settings, redis_url: str, index: int, count: int,
                  directory: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of child ``index``: every setting as its NSFLEET_* variable (so flags
    given to the supervisor reach it too), one process each, the group's Redis."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith("NSFLEET_")}
    for f in fields(Settings):
        value = getattr(settings, f.name)
        env[env_name(f.name)] = ("true" if value else "false") if isinstance(value, bool) \
            else str(value)
    env[env_name("processes")] = "1"
    env[env_name("redis_url")] = redis_url
    env[INDEX_ENV], env[COUNT_ENV], env[DIR_ENV] = str(index), str(count), str(directory)
    return env


@dataclass
class Child:
    index: int
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    backoff: float = BACKOFF_FIRST
    restart_at: float | None = None  # monotonic time of a pending restart


class Supervisor:
    def __init__(self, settings: Settings, count: int,
                 command: list[str] | None = None, repair_aof: bool = False) -> None:
        self.settings = settings
        self.count = count
        self.command = command or [sys.executable, "-m", "nsfleet", "serve"]
        self.children = [Child(k) for k in range(count)]
        self.crashes: collections.deque[float] = collections.deque()
        self.stopping = False
        self.directory = Path(tempfile.mkdtemp(prefix="nsfleet-processes-"))
        self.embedded: EmbeddedRedis | None = None
        self.redis_url = settings.redis_url
        self.repair_aof = repair_aof

    def _signal(self, signum: int, _frame: FrameType | None) -> None:
        if not self.stopping:
            log.info("stopping the worker processes", signal=signal.Signals(signum).name)
        self.stopping = True

    def _spawn(self, child: Child) -> None:
        env = child_environ(self.settings, self.redis_url, child.index, self.count,
                            self.directory)
        child.process = subprocess.Popen(self.command, env=env, stdin=subprocess.DEVNULL,
                                         preexec_fn=_die_with_parent)
        child.started = time.monotonic()
        child.restart_at = None
        log.info("worker process started", process=child.index, pid=child.process.pid)

    def run(self) -> int:
        if not reuse_port_supported():
            raise SupervisorError("--processes above 1 needs SO_REUSEPORT, which this system "
                                  "lacks: run one process per port instead")
        previous = {sig: signal.signal(sig, self._signal) for sig in (signal.SIGTERM,
                                                                      signal.SIGINT)}
        try:
            if self.settings.embedded_redis:
                self.embedded = EmbeddedRedis(self.settings.effective_data_dir,
                                              repair_aof=self.repair_aof)
                self.redis_url = self.embedded.start()
            log.info("supervising worker processes", processes=self.count,
                     http=f"{self.settings.host}:{self.settings.http_port}",
                     remoting=f"{self.settings.host}:{self.settings.remoting_port}")
            for child in self.children:
                self._spawn(child)
            gave_up = self._watch()
            codes = self._stop_children()
        finally:
            if self.embedded is not None:
                self.embedded.stop()
            shutil.rmtree(self.directory, ignore_errors=True)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if gave_up is not None:
            # Logged last, after the workers' own last lines (each writes the error reports it
            # folded as it exits): nothing follows the fatal line.
            event, fields = gave_up
            log.error(event, **fields)
            return 1
        failed = {k: c for k, c in codes.items() if c != 0}
        if failed:
            log.warning("worker processes exited with errors", exit_codes=failed)
            return 1
        log.info("worker processes stopped", processes=self.count)
        return 0

    def _watch(self) -> tuple[str, dict[str, object]] | None:
        """Until asked to stop; the fatal line to log (event, fields) when children (or the
        embedded Redis) kept crashing."""
        while not self.stopping:
            now = time.monotonic()
            if self.embedded is not None:
                try:
                    self.embedded.supervise(now)
                except EmbeddedRedisDied as exc:
                    return "embedded redis keeps exiting: giving up", {"error": str(exc)}
            for child in self.children:
                if child.process is None:
                    if child.restart_at is not None and now >= child.restart_at:
                        self._spawn(child)
                    continue
                code = child.process.poll()
                if code is None or self.stopping:
                    continue
                child.process = None
                self.crashes.append(now)
                while self.crashes and now - self.crashes[0] > CRASH_WINDOW:
                    self.crashes.popleft()
                if len(self.crashes) > CRASH_LIMIT:
                    return "worker processes keep exiting: giving up", {
                        "exits": len(self.crashes), "window_s": CRASH_WINDOW,
                        "last_process": child.index, "exit_code": code}
                if now - child.started >= STABLE_AFTER:
                    child.backoff = BACKOFF_FIRST
                delay = child.backoff
                child.backoff = min(child.backoff * 2, BACKOFF_MAX)
                child.restart_at = now + delay
                log.warning("worker process exited: restarting it", process=child.index,
                            exit_code=code, restart_in_s=delay)
            time.sleep(POLL)
        return None

    def _stop_children(self) -> dict[int, int]:
        """SIGTERM to every child, each drains; their exit codes by slot."""
        running = [c for c in self.children if c.process is not None]
        for child in running:
            assert child.process is not None
            with contextlib.suppress(ProcessLookupError):
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.settings.drain_timeout + KILL_GRACE
        codes: dict[int, int] = {}
        for child in running:
            assert child.process is not None
            try:
                codes[child.index] = child.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("worker process did not stop: killing it", process=child.index)
                child.process.kill()
                codes[child.index] = child.process.wait()
        return codes


def run(settings: Settings, repair_aof: bool = False) -> int:
    return Supervisor(settings, settings.process_count(), repair_aof=repair_aof).run()
