"""structlog set-up: JSON lines for machines, key=value console output for people."""

from __future__ import annotations

import logging
import logging.handlers
import sys

import structlog

LOG_FILE_BYTES = 50 * 1024 * 1024  # rotate at 50 MiB, keeping 5 older files
LOG_FILE_BACKUPS = 5


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
    root = logging.getLogger()
    root.handlers[:] = [handler]
    if log_file:
        rotating = logging.handlers.RotatingFileHandler(
            log_file, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8")
        rotating.setFormatter(structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                        structlog.processors.JSONRenderer()],
            foreign_pre_chain=shared))
        root.handlers.append(rotating)
    root.setLevel(level.upper())
    # aiohttp logs every request at INFO; our metrics already count them.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
