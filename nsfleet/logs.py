"""structlog set-up: JSON lines for machines, key=value console output for people."""

from __future__ import annotations

import asyncio
import atexit
import logging
import logging.handlers
import sys
import threading
import time
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

import structlog
from aiohttp.http_exceptions import HttpProcessingError

from nsfleet.domain.excerpt import clipped

LOG_FILE_BYTES = 50 * 1024 * 1024  # rotate at 50 MiB, keeping 5 older files
LOG_FILE_BACKUPS = 5
FOLD_WINDOW_S = 10.0  # identical error reports: one line, then one count per window
# Longest text a field of a log line keeps (a bad request's value shows its start and length);
# the event itself, for libraries' messages, may be longer.
LOG_VALUE_CHARS = 300
LOG_EVENT_CHARS = 1000


@dataclass
class _Folded:
    written_at: float
    pending: int = 0
    timer: threading.Timer | None = None
    peers: set[str] = field(default_factory=set)  # of the reports folded in this window


def clip_values(logger: Any, method: str, event: MutableMapping[str, Any]
                ) -> MutableMapping[str, Any]:
    """Cut every long text of a log line to its start and length: a request's value is as
    long as its frame (16 MiB), and one such value per line filled the log."""
    for key, value in event.items():
        if isinstance(value, str):
            limit = LOG_EVENT_CHARS if key == "event" else LOG_VALUE_CHARS
            if len(value) > limit:
                event[key] = clipped(value, limit)
    return event


class FoldRepeats:
    """Folds repeated identical error reports (a warning or worse that carries ``error``, the
    audit trail excepted): the first is written, the ones after it within ``window`` seconds
    are counted, and when the window ends one line repeats the event with ``repeated=N`` (how
    many it stands for). A Redis outage answers every request with the same error; written
    one per request they bury the lines that say what the worker does about it. The metrics
    count every one at the call site (nsfleet_redis_errors_total), whatever is written.

    Identical means every field but the timestamp and the peer, so a different route, request
    code or error text is its own line, while the same bad input from many connections is one
    (its count line says from how many peers)."""

    MAX_KEYS = 256  # distinct reports remembered; older quiet ones are forgotten past this
    MAX_PEERS = 1024  # distinct peers counted per window
    UNFOLDED: frozenset[str] = frozenset({"timestamp", "peer"})

    def __init__(self, window: float = FOLD_WINDOW_S) -> None:
        self.window = window
        self._seen: dict[str, _Folded] = {}
        self._lock = threading.Lock()

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]
                 ) -> MutableMapping[str, Any]:
        if ("error" not in event or "repeated" in event or event.get("audit")
                or logging.getLevelName(method.upper()) not in (logging.WARNING, logging.ERROR,
                                                                logging.CRITICAL)):
            return event
        key = repr(sorted((k, repr(v)) for k, v in event.items() if k not in self.UNFOLDED))
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(key)
            if seen is None or (seen.pending == 0 and now - seen.written_at >= self.window):
                if seen is None and len(self._seen) >= self.MAX_KEYS:
                    self._forget(now)
                self._seen[key] = _Folded(now)
                return event
            seen.pending += 1
            if "peer" in event and len(seen.peers) < self.MAX_PEERS:
                seen.peers.add(str(event["peer"]))
            if seen.timer is None:
                seen.timer = threading.Timer(seen.written_at + self.window - now, self._count,
                                             (key, logger, method, dict(event)))
                seen.timer.daemon = True
                seen.timer.start()
        raise structlog.DropEvent

    def flush(self) -> None:
        """Write the counts not written yet (at exit: the process stops mid-window)."""
        with self._lock:
            timers = [seen.timer for seen in self._seen.values() if seen.timer is not None]
        for timer in timers:
            timer.cancel()
            timer.function(*timer.args)

    def _count(self, key: str, logger: Any, method: str, event: dict[str, Any]) -> None:
        """The window ended: one line for what it folded."""
        with self._lock:
            seen = self._seen[key]
            repeated, seen.pending, seen.timer = seen.pending, 0, None
            peers, seen.peers = seen.peers, set()
            seen.written_at = time.monotonic()
        if not repeated:  # flushed already
            return
        what = event.pop("event")
        event.pop("timestamp", None)
        event.pop("level", None)
        if peers:
            event.pop("peer", None)
            event["peers"] = len(peers)
        structlog.wrap_logger(logger).log(
            logging.getLevelName(method.upper()), what, **event, repeated=repeated,
            window_s=self.window)

    def _forget(self, now: float) -> None:
        self._seen = {k: v for k, v in self._seen.items()
                      if v.pending or now - v.written_at < self.window}


class _DeliberateCancellation(logging.Filter):
    """Drops APScheduler's report of a job cancelled by the scheduler's shutdown: a worker that
    stops cancels a sweep still running past its grace period (nsfleet.worker), and APScheduler
    logs every cancellation as 'Job ... raised an exception' with a CancelledError traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.startswith("apscheduler") and record.exc_info is not None
                    and isinstance(record.exc_info[1], asyncio.CancelledError))


class _MalformedHttp(logging.Filter):
    """aiohttp reports each request it cannot parse (a bad request line or header, a bad
    Content-Length) at ERROR with a ~50-line traceback, ~30 ms of the event loop each: one
    warning line instead, folded like any repeated error. It has answered 400 already."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError):
            return True
        peer = record.args[0] if isinstance(record.args, tuple) and record.args else "-"
        structlog.get_logger("nsfleet.http").warning(
            "malformed HTTP request", error=exc.message or type(exc).__name__, peer=str(peer))
        return False


_fold: FoldRepeats | None = None  # the one configure() set up, flushed at exit


@atexit.register
def flush_folded() -> None:
    """Write the counts of the error reports folded so far: at exit, and before a fatal line,
    which then stays the last."""
    if _fold is not None:
        _fold.flush()


def configure(log_format: str = "console", level: str = "info", log_file: str = "") -> None:
    """Logs to stderr, and with ``log_file`` also to that file as JSON lines, rotated (for
    set-ups without a log collector: the audit trail lives there too)."""
    # JSON lines carry a traceback as one "exception" field; the console renders its own.
    as_json = [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    rendering: list[structlog.typing.Processor] = (
        as_json if log_format == "json"
        else [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())])
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        clip_values,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    global _fold
    if _fold is not None:
        _fold.flush()
    fold = _fold = FoldRepeats(FOLD_WINDOW_S)
    structlog.configure(
        # Folding runs once per event (not per handler): stdlib records from libraries pass
        # unfolded through foreign_pre_chain.
        processors=[*shared, fold, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
        foreign_pre_chain=shared))
    handler.addFilter(_DeliberateCancellation())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    if log_file:
        rotating = logging.handlers.RotatingFileHandler(
            log_file, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8")
        rotating.setFormatter(structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *as_json],
            foreign_pre_chain=shared))
        rotating.addFilter(_DeliberateCancellation())
        root.handlers.append(rotating)
    root.setLevel(level.upper())
    # aiohttp logs every request at INFO; our metrics already count them.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    server = logging.getLogger("aiohttp.server")
    server.filters[:] = [f for f in server.filters if not isinstance(f, _MalformedHttp)]
    server.addFilter(_MalformedHttp())
