"""The console behind HTTP tokens, in a real browser: opened once as /ui#token=READ_TOKEN it
keeps the token for the tab, drops it from the address bar, and shows the fleet."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from nsfleet.redis_server import RedisServer
from tests.integration.test_console import broker
from tests.integration.test_console import browser as browser  # the fixture
from tests.support.fleet import wait_until
from tests.support.workers import WorkerProcess

pytestmark = pytest.mark.redis

READ, WRITE = "console-read-token-0123456789", "console-write-token-0123456789"


def post(url: str, body: Any, token: str) -> int:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.status


def test_the_console_takes_a_read_token(redis_server: RedisServer, tmp_path: Path,
                                        browser: Any) -> None:
    (tmp_path / "read").write_text(READ)
    (tmp_path / "write").write_text(WRITE)
    worker = WorkerProcess({"NSFLEET_REDIS_URL": redis_server.url,
                            "NSFLEET_NAMESPACE": "console-token",
                            "NSFLEET_READ_TOKEN_FILE": str(tmp_path / "read"),
                            "NSFLEET_WRITE_TOKEN_FILE": str(tmp_path / "write")},
                           tmp_path / "w.log").start()
    try:
        body = broker("broker-a", "10.0.0.1:10911", 0, ["Orders", "Payments"])
        assert post(f"{worker.url}/v1/brokers/register", body, WRITE) == 200
        browser.get(f"{worker.url}/ui#token={READ}")
        summary = browser.find_element("id", "summary")
        wait_until(lambda: summary.text == "1 clusters, 1 broker groups, 1 brokers, 2 topics",
                   timeout=15.0)
        assert "token" not in browser.current_url
        browser.get(f"{worker.url}/ui")  # the same tab: the token is remembered
        summary = browser.find_element("id", "summary")
        wait_until(lambda: summary.text.endswith("2 topics"), timeout=15.0)
    finally:
        assert worker.stop() == 0


def test_the_console_asks_for_a_token(redis_server: RedisServer, tmp_path: Path,
                                      browser: Any) -> None:
    """Opened with no token, the page shows a token form instead of a bare 401; a wrong token is
    refused there, the right one opens the console and is kept for the tab."""
    (tmp_path / "read").write_text(READ)
    worker = WorkerProcess({"NSFLEET_REDIS_URL": redis_server.url,
                            "NSFLEET_NAMESPACE": "console-prompt",
                            "NSFLEET_READ_TOKEN_FILE": str(tmp_path / "read")},
                           tmp_path / "w.log").start()
    try:
        browser.get(f"{worker.url}/ui")
        form = browser.find_element("id", "login")
        wait_until(form.is_displayed, timeout=15.0)
        assert not browser.find_element("id", "console").is_displayed()
        field = browser.find_element("id", "token-input")
        field.send_keys("not-the-token")
        form.find_element("css selector", "button").click()
        error = browser.find_element("id", "login-error")
        wait_until(lambda: form.is_displayed() and "refused" in error.text, timeout=15.0)
        field.send_keys(READ)
        form.find_element("css selector", "button").click()
        summary = browser.find_element("id", "summary")
        wait_until(lambda: summary.text == "0 clusters, 0 broker groups, 0 brokers, 0 topics",
                   timeout=15.0)
        assert not form.is_displayed()
        assert browser.execute_script("return sessionStorage.getItem('nsfleetToken')") == READ
    finally:
        assert worker.stop() == 0
