"""The logging set-up folds repeated identical error reports (nsfleet/logs.py, issue 29)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
import structlog

from nsfleet import logs
from nsfleet.logs import FoldRepeats


class Sink:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def msg(self, **event: Any) -> None:
        self.events.append(event)

    warning = error = info = log = msg


@pytest.fixture
def folded() -> Any:
    sink = Sink()
    fold = FoldRepeats(window=0.3)

    def render(logger: Any, method: str, event: Any) -> Any:
        return {**event, "level": method}

    structlog.configure(processors=[fold, render], logger_factory=lambda *_: sink,
                        wrapper_class=structlog.stdlib.BoundLogger,
                        cache_logger_on_first_use=False)
    yield sink
    structlog.reset_defaults()


def test_identical_errors_are_written_once_then_counted_per_window(folded: Sink) -> None:
    log = structlog.get_logger()
    for _ in range(50):
        log.warning("redis error", route="/a", error="down")
    assert [e["event"] for e in folded.events] == ["redis error"]
    time.sleep(0.5)
    assert folded.events[1] == {"event": "redis error", "route": "/a", "error": "down",
                                "repeated": 49, "window_s": 0.3, "level": "warning"}
    time.sleep(0.4)
    log.warning("redis error", route="/a", error="down")  # quiet for a window: written again
    assert len(folded.events) == 3 and "repeated" not in folded.events[2]


def test_flush_writes_the_counts_of_an_open_window() -> None:
    """At exit (logs.configure registers it) a window still open writes its count at once."""
    sink = Sink()
    fold = FoldRepeats(window=60)
    structlog.configure(processors=[fold, lambda _, method, e: {**e, "level": method}],
                        logger_factory=lambda *_: sink,
                        wrapper_class=structlog.stdlib.BoundLogger,
                        cache_logger_on_first_use=False)
    try:
        for _ in range(5):
            structlog.get_logger().error("sweep failed", error="down")
        fold.flush()
        fold.flush()  # nothing left: nothing written
        assert [(e["event"], e.get("repeated")) for e in sink.events] == [
            ("sweep failed", None), ("sweep failed", 4)]
    finally:
        structlog.reset_defaults()


def test_only_identical_warnings_with_an_error_fold(folded: Sink) -> None:
    log = structlog.get_logger()
    for _ in range(3):
        log.warning("redis error", route="/a", error="down")
        log.warning("redis error", route="/b", error="down")  # another route: its own line
        log.warning("redis error", route="/a", error="timeout")  # another error
        log.warning("serving a stale view while the store is away", routes=3)  # no error
        log.info("replayed", error="down")  # not a warning
        log.warning("broker refused", error="down", audit=True)  # the audit trail
    assert len(folded.events) == 3 + 3 * 3
    time.sleep(0.5)
    assert sorted((e["route"], e["error"], e["repeated"]) for e in folded.events[12:]) == [
        ("/a", "down", 2), ("/a", "timeout", 2), ("/b", "down", 2)]


def test_the_worker_set_up_folds_once_for_every_handler(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """stderr and the log file each get one line for the first report and one for the count."""
    monkeypatch.setattr(logs, "FOLD_WINDOW_S", 0.3)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        logs.configure("json", "info", str(tmp_path / "log.jsonl"))
        log = structlog.get_logger("test")
        for _ in range(20):
            log.warning("redis error", route="/a", error="down")
        logging.getLogger("redis").warning("library record, never folded")
        logging.getLogger("redis").warning("library record, never folded")
        time.sleep(0.5)
        for text in (capsys.readouterr().err, (tmp_path / "log.jsonl").read_text()):
            events = [json.loads(line) for line in text.splitlines()]
            assert [(e["event"], e.get("repeated")) for e in events] == [
                ("redis error", None), ("library record, never folded", None),
                ("library record, never folded", None), ("redis error", 19)]
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:], root.level = saved
        structlog.reset_defaults()


def test_the_same_bad_input_from_many_peers_folds_into_one_line(folded: Sink) -> None:
    """The peer is not part of what makes two reports identical: an attack from many
    connections is one line, and its count says from how many peers."""
    log = structlog.get_logger()
    for port in range(30):
        log.warning("closing remoting connection: bad frame", error="bad frame length 0",
                    peer=f"127.0.0.1:{40000 + port}")
    assert len(folded.events) == 1 and folded.events[0]["peer"] == "127.0.0.1:40000"
    time.sleep(0.5)
    assert folded.events[1] == {"event": "closing remoting connection: bad frame",
                                "error": "bad frame length 0", "repeated": 29, "peers": 29,
                                "window_s": 0.3, "level": "warning"}


def test_long_values_are_cut_to_their_start_and_length() -> None:
    event = logs.clip_values(None, "warning", {
        "event": "e" * 5000, "error": "A" * 8_000_000, "peer": "127.0.0.1:1", "count": 3})
    assert event["error"] == "A" * logs.LOG_VALUE_CHARS + "…(8000000 chars)"
    assert event["event"] == "e" * logs.LOG_EVENT_CHARS + "…(5000 chars)"
    assert (event["peer"], event["count"]) == ("127.0.0.1:1", 3)


def test_aiohttp_reports_of_malformed_requests_become_one_warning_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """aiohttp logs a request it cannot parse at ERROR with a traceback; the worker's set-up
    writes one folded warning instead, and keeps the traceback of any other exception."""
    from aiohttp.http_exceptions import BadStatusLine

    monkeypatch.setattr(logs, "FOLD_WINDOW_S", 0.2)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    server = logging.getLogger("aiohttp.server")
    try:
        logs.configure("json", "info")
        for _ in range(3):
            try:
                raise BadStatusLine("GET / HTTP/9.9")
            except BadStatusLine as exc:
                server.exception("Error handling request from %s", "127.0.0.1", exc_info=exc)
        try:
            raise KeyError("a bug")
        except KeyError as exc:
            server.exception("Error handling request from %s", "127.0.0.1", exc_info=exc)
        time.sleep(0.4)
        first, bug, count = map(json.loads, capsys.readouterr().err.splitlines())
        assert (first["event"], first["level"], first["peer"]) == (
            "malformed HTTP request", "warning", "127.0.0.1")
        assert "HTTP/9.9" in first["error"] and "exception" not in first
        assert "KeyError" in bug["exception"]
        assert (count["event"], count["repeated"]) == ("malformed HTTP request", 2)
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:], root.level = saved
        server.filters.clear()
        structlog.reset_defaults()
