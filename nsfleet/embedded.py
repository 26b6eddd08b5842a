"""The embedded Redis of ``nsfleet serve`` with no --redis-url: a private redis-server child with
AOF on in the user's data directory, locked so two workers never share one data directory, and
stopped with the worker (on Linux it also dies if the worker is killed)."""

from __future__ import annotations

import ctypes
import fcntl
import signal
import sys
from pathlib import Path
from typing import IO

from nsfleet.redis_server import RedisServer

PR_SET_PDEATHSIG = 1
URL_FILE = "redis.url"  # the running embedded Redis's URL, for `nsfleet analytics` and operators


def running_url(data_dir: str | Path) -> str | None:
    """The URL of the embedded Redis a running worker keeps in ``data_dir``, if there is one."""
    try:
        return (Path(data_dir) / URL_FILE).read_text().strip() or None
    except OSError:
        return None


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class EmbeddedRedis:
    def __init__(self, data_dir: str) -> None:
        self.data_dir = Path(data_dir)
        self.server = RedisServer(data_dir=self.data_dir, appendonly=True,
                                  preexec=_die_with_parent)
        self._lock: IO[str] | None = None

    def start(self) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.data_dir / "nsfleet.lock", "w")  # noqa: SIM115 - held until stop
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise RuntimeError(f"another nsfleet worker uses the embedded Redis in {self.data_dir};"
                               " give this one --data-dir or --redis-url") from None
        self.server.start()
        (self.data_dir / URL_FILE).write_text(self.server.url + "\n")
        return self.server.url

    def stop(self) -> None:
        (self.data_dir / URL_FILE).unlink(missing_ok=True)
        self.server.stop()
        if self._lock is not None:
            self._lock.close()
            self._lock = None
