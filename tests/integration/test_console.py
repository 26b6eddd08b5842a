"""The read-only fleet console at /ui, in a real browser (headless Chromium from Debian, driven by
selenium with the system chromedriver): the page shows what cluster info says and the
controller's broker sets, follows a broker leaving; and at fleet scale (10,000 topics, 500
brokers): search, sort, paging, the topic and broker-group views and the recent-changes panel.
bench/console_bench.py makes the screenshot of docs/console.md.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore
from tests.support import big_fleet
from tests.support.controller_sets import make_broker_set, replica_address
from tests.support.fleet import wait_until
from tests.support.workers import WorkerProcess
from tests.support.workers import request as http

pytestmark = pytest.mark.redis


async def _controller_set(redis_url: str, namespace: str) -> None:
    """A broker set in controller mode, made in the worker's tables as a broker makes it."""
    redis = aioredis.Redis.from_url(redis_url, decode_responses=True)
    store = RouteStore(redis, namespace)
    await store.load_scripts()
    await make_broker_set(store, "broker-c", "DemoCluster", (1, 2))
    await redis.aclose()


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
        asyncio.run(_controller_set(redis_server.url, "console"))
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
        # The controller's broker set: its master, epochs and replicas.
        assert browser.find_element("id", "controller-count").text == (
            "1 broker sets, 0 without a live master")
        controller = browser.find_element("id", "controller").text
        for text in ("broker-c", f"1 {replica_address('broker-c', 1)}", "1;2 (2)",
                     f"2 {replica_address('broker-c', 2)} alive, in sync"):
            assert text in controller, controller
        # Each kind badge ("normal") on one line and inside its cell, at 1400 px and at the
        # narrowest width of the two-panel layout.
        for width in (1400, 1301):
            browser.set_window_size(width, 900)
            badges = browser.execute_script(
                "return [...document.querySelectorAll('#topics .kind')].map(b => ["
                "b.textContent, b.getClientRects().length,"
                "b.getBoundingClientRect().right <= b.closest('td').getBoundingClientRect().right"
                "])")
            assert badges and all(b == ["normal", 1, True] for b in badges), (width, badges)

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


def _shown_topics(browser: Any) -> list[str]:
    return [row.find_element("css selector", "td").text
            for row in browser.find_elements("css selector", "#topics tbody tr")]


def _pager(browser: Any) -> str:
    return str(browser.find_element("id", "topics-pager").text)


def test_the_console_at_fleet_scale(redis_server: RedisServer, tmp_path: Path,
                                    browser: Any) -> None:
    """10,000 topics and 500 brokers: search narrows the topics (by name, group, address),
    sorting and paging work, system and retry topics are hidden by default, the topic and
    broker-group views show the route, and the changes panel shows a registration and an expiry
    made meanwhile."""
    from selenium.webdriver.support.ui import Select

    worker = WorkerProcess({"NSFLEET_REDIS_URL": redis_server.url,
                            "NSFLEET_NAMESPACE": "console-scale", "NSFLEET_SWEEP_INTERVAL": "1"},
                           tmp_path / "w.log").start()
    try:
        url = worker.url
        fleet = big_fleet.layout()
        big_fleet.register(url, fleet)
        assert http("PUT", f"{url}/v1/kv/ORDER_TOPIC_CONFIG/Orders-00042",
                    {"value": "broker-042:8;broker-043:8"})[0] == 200
        browser.get(f"{url}/ui")
        summary = browser.find_element("id", "summary")
        wait_until(lambda: summary.text == "5 clusters, 250 broker groups, 500 brokers, "
                                           "10000 topics", timeout=30.0)
        assert browser.execute_script("return window.nsfleetConsole.firstRenderMs") > 0
        # Application topics only, 100 a page: 9,995 less 999 %RETRY% ones.
        shown = _shown_topics(browser)
        assert shown[:2] == ["Orders-00000", "Orders-00001"] and len(shown) == 100
        assert "1\u2013100 of 8,996" in _pager(browser)  # an en dash
        browser.find_element("css selector", "#topics-pager button:last-child").click()
        assert _shown_topics(browser)[0] == "Orders-00111"  # page 2 (retry topics skipped)
        kinds = Select(browser.find_element("id", "topic-kind"))
        kinds.select_by_value("retry")
        assert all(t.startswith("%RETRY%") for t in _shown_topics(browser))
        assert "of 999" in _pager(browser)
        kinds.select_by_value("system")
        assert sorted(_shown_topics(browser)) == sorted(big_fleet.SYSTEM_TOPICS)
        kinds.select_by_value("normal")

        search = browser.find_element("id", "topic-search")
        search.send_keys("Orders-0421")
        assert _shown_topics(browser) == [f"Orders-0421{d}" for d in range(9)]
        search.clear()
        search.send_keys("broker-007")  # a group: the topics it serves
        by_group = _shown_topics(browser)
        search.clear()
        search.send_keys("10.1.0.7:10911")  # its slave's address
        assert _shown_topics(browser) == by_group and "Orders-00006" in by_group
        search.clear()
        search.send_keys(" ")  # nothing typed: everything again
        assert "of 8,996" in _pager(browser)

        topic_header = browser.find_element("css selector", "#topics th[data-key=topic]")
        topic_header.click()  # sorted by topic already: now descending
        assert _shown_topics(browser)[0] == "Orders-09994"
        assert topic_header.get_attribute("aria-sort") == "descending"
        browser.find_element("css selector", "#topics th[data-key=perms]").click()
        assert browser.find_element("css selector", "#topics tbody tr td:nth-child(6)").text \
            == "R--"

        # The topic view: its route; then its group's view.
        search.clear()
        search.send_keys("Orders-00042")
        browser.find_element("link text", "Orders-00042").click()
        detail = browser.find_element("id", "detail")
        for text in ("Topic Orders-00042", "broker-042", "broker-043", "Cluster-2", "Cluster-3",
                     "RW-", "broker-042:8;broker-043:8", fleet.addr("broker-043", 1)):
            assert text in detail.text
        detail.find_element("link text", "broker-043").click()
        for text in ("Broker group broker-043", fleet.addr("broker-043", 0),
                     fleet.addr("broker-043", 1), "alive", "#1 at", "Orders-00042"):
            assert text in detail.text

        # A registration and an expiry made now show in the changes panel.
        assert http("POST", f"{url}/v1/brokers/register", {
            **broker("broker-late", "10.9.9.9:10911", 0, ["Late", "Later"]),
            "heartbeatTimeoutMillis": 1500})[0] == 200
        changes = browser.find_element("id", "changes")
        wait_until(lambda: "broker registered" in changes.text and "10.9.9.9:10911"
                   in changes.text, timeout=15.0)
        wait_until(lambda: "broker expired" in changes.text, timeout=20.0)
        worker_id = http("GET", f"{url}/v1/status")[1]["workerId"]
        assert worker_id in changes.text
    finally:
        worker.stop()
