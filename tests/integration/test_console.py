"""The read-only fleet console at /ui, in a real browser (headless Chromium from Debian, driven by
selenium with the system chromedriver): the page shows what cluster info says, follows a broker
leaving, and makes the README's screenshot (NSFLEET_UPDATE_SCREENSHOT=1 writes docs/console.png).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nsfleet.redis_server import RedisServer
from tests.support.fleet import wait_until
from tests.support.workers import WorkerProcess
from tests.support.workers import request as http

pytestmark = pytest.mark.redis

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "console.png"


def broker(name: str, addr: str, broker_id: int, topics: list[str]) -> dict[str, Any]:
    return {"clusterName": "DemoCluster", "brokerAddr": addr, "brokerName": name,
            "brokerId": broker_id, "dataVersion": {"counter": 1, "timestamp": 1},
            "topicConfigTable": {t: {"readQueueNums": 4, "writeQueueNums": 4} for t in topics}}


@pytest.fixture
def browser() -> Iterator[Any]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        if os.environ.get("CI"):
            raise RuntimeError("CI needs chromium and chromium-driver (apt-get install)")
        pytest.skip("no chromium / chromedriver on this machine")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1400,900"):
        options.add_argument(arg)
    b = webdriver.Chrome(options=options, service=Service(driver))
    yield b
    b.quit()


def test_the_console_follows_the_fleet(redis_server: RedisServer, tmp_path: Path,
                                       browser: Any) -> None:
    worker = WorkerProcess({"NSFLEET_REDIS_URL": redis_server.url,
                            "NSFLEET_NAMESPACE": "console"}, tmp_path / "w.log").start()
    try:
        url = worker.url
        for body in (broker("broker-a", "10.0.0.1:10911", 0, ["Orders", "Payments", "Audit"]),
                     broker("broker-a", "10.0.0.2:10911", 1, ["Orders", "Payments", "Audit"]),
                     {**broker("broker-b", "10.0.0.3:10911", 0, ["Orders", "Shipping"]),
                      "heartbeatTimeoutMillis": 5000}):
            assert http("POST", f"{url}/v1/brokers/register", body)[0] == 200
        assert http("PUT", f"{url}/v1/kv/ORDER_TOPIC_CONFIG/Orders",
                    {"value": "broker-a:4;broker-b:4"})[0] == 200
        info = http("GET", f"{url}/v1/cluster-info")[1]
        members = sum(len(g["brokerAddrs"]) for g in info["brokerAddrTable"].values())
        expected = (f"{len(info['clusterAddrTable'])} clusters, "
                    f"{len(info['brokerAddrTable'])} broker groups, {members} brokers, 4 topics")

        browser.get(f"{url}/ui")
        summary = browser.find_element("id", "summary")
        wait_until(lambda: summary.text == expected, timeout=15.0)
        groups = browser.find_element("id", "groups")
        assert groups.text.count("alive") == 3 and "10.0.0.3:10911" in groups.text
        assert "broker-a:4;broker-b:4" in browser.find_element("id", "kv").text
        assert "orderMessageEnable" in browser.find_element("id", "config").text
        if os.environ.get("NSFLEET_UPDATE_SCREENSHOT"):
            browser.save_screenshot(str(SCREENSHOT))

        # broker-b dies (no heartbeat since its registration): it leaves the page at its
        # deadline, without a reload.
        wait_until(lambda: "10.0.0.3:10911" not in browser.find_element("id", "groups").text,
                   timeout=20.0)
        assert browser.find_element("id", "summary").text.startswith(
            "1 clusters, 1 broker groups, 2 brokers")
    finally:
        worker.stop()


def test_no_ui_turns_it_off(redis_server: RedisServer, tmp_path: Path) -> None:
    worker = WorkerProcess({"NSFLEET_REDIS_URL": redis_server.url, "NSFLEET_UI": "false"},
                           tmp_path / "w.log").start()
    try:
        assert http("GET", f"{worker.url}/ui")[0] == 404
    finally:
        worker.stop()
