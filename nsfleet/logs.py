"""structlog set-up: JSON lines for machines, key=value console output for people."""

from __future__ import annotations

import asyncio
import logging
import logging.handlers
import sys

import structlog

LOG_FILE_BYTES = 50 * 1024 * 1024  # rotate at 50 MiB, keeping 5 older files
LOG_FILE_BACKUPS = 5


class _DeliberateCancellation(logging.Filter):
    """Drops APScheduler's report of a job cancelled by the scheduler's shutdown: a worker that
    stops cancels a sweep still running past its grace period (nsfleet.worker), and APScheduler
    logs every cancellation as 'Job ... raised an exception' with a CancelledError traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.startswith("apscheduler") and record.exc_info is not None
                    and isinstance(record.exc_info[1], asyncio.CancelledError))


def configure(log_format: str = "console", level: str = "info", log_file: str = "") -> None:
    """Logs to stderr, and with ``log_file`` also to that file as JSON lines, rotated (for
    set-ups without a log collector: the audit trail lives there too)."""
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()))
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        foreign_pre_chain=shared))
    handler.addFilter(_DeliberateCancellation())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    if log_file:
        rotating = logging.handlers.RotatingFileHandler(
            log_file, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8")
        rotating.setFormatter(structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                        structlog.processors.JSONRenderer()],
            foreign_pre_chain=shared))
        rotating.addFilter(_DeliberateCancellation())
        root.handlers.append(rotating)
    root.setLevel(level.upper())
    # aiohttp logs every request at INFO; our metrics already count them.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
