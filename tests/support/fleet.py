"""A fleet of real nsfleet workers for client tests: ``serve()`` tasks on one event loop in a
background thread, over the session's real redis-server, on 127.0.0.1 and free ports.

The workers live on their own loop so that tests may be sync (the admin CLI, SyncBrokerAgent) or
async (on pytest's loop) alike, and a test can stop one worker to see clients fail over.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import structlog

from nsfleet.config import Settings
from nsfleet.redis_server import free_port
from nsfleet.worker import serve

START_TIMEOUT = 15.0


def http_json(url: str, method: str = "GET", body: Any = None, timeout: float = 5.0) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        exc.read()
        raise


def wait_until(check: Callable[[], Any], timeout: float = 5.0, interval: float = 0.02) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


async def async_wait_until(check: Callable[[], Any], within: float = 5.0,
                           interval: float = 0.02) -> Any:
    deadline = time.monotonic() + within
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within} s")
        await asyncio.sleep(interval)


class Fleet:
    def __init__(self, redis_url: str, workers: int = 2, **overrides: Any) -> None:
        self.namespace = "t" + uuid.uuid4().hex[:12]
        base = Settings(redis_url=redis_url, host="127.0.0.1", namespace=self.namespace,
                        drain_timeout=1.0, **overrides)
        self.settings = [replace(base, http_port=free_port(), remoting_port=free_port())
                         for _ in range(workers)]
        self.urls = [f"http://127.0.0.1:{s.http_port}" for s in self.settings]
        self.log = io.StringIO()  # worker logs, kept off stdout (the CLI tests read stdout)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="test-fleet")
        self._stops: list[asyncio.Event] = []
        self._tasks: list[asyncio.Future[int]] = []
        self._structlog_config: dict[str, Any] = {}

    @property
    def servers(self) -> str:
        return ",".join(self.urls)

    def start(self) -> Fleet:
        self._structlog_config = structlog.get_config()
        structlog.configure(logger_factory=structlog.WriteLoggerFactory(self.log))
        self._thread.start()
        for settings in self.settings:
            stop = asyncio.Event()
            self._stops.append(stop)
            self._tasks.append(asyncio.run_coroutine_threadsafe(serve(settings, stop), self._loop))
        for url in self.urls:
            wait_until(lambda url=url: self._ready(url), START_TIMEOUT)
        return self

    @staticmethod
    def _ready(url: str) -> bool:
        try:
            return http_json(f"{url}/readyz", timeout=1.0)["status"] == "ready"
        except (OSError, ValueError):
            return False

    def stop_worker(self, index: int, timeout: float = 10.0) -> None:
        """Stop one worker as SIGTERM would (drain, close listeners) and wait until it is down."""
        self._loop.call_soon_threadsafe(self._stops[index].set)
        self._tasks[index].result(timeout)

    def get(self, route: str, worker: int = -1) -> Any:
        """GET a path from a running worker (the last one by default)."""
        return http_json(self.urls[worker] + route)

    def post(self, route: str, body: Any = None, worker: int = -1) -> Any:
        return http_json(self.urls[worker] + route, "POST", body if body is not None else {})

    def brokers(self, worker: int = -1) -> list[dict[str, Any]]:
        return list(self.get("/v1/brokers", worker)["brokers"])

    def update_config(self, props: dict[str, str]) -> None:
        """Change the fleet's NamesrvConfig (what UPDATE_NAMESRV_CONFIG does)."""
        async def update() -> None:
            from nsfleet.redis_conn import connect
            from nsfleet.service.namesrv_config import NamesrvConfig
            from nsfleet.store import RouteStore

            client = connect(self.settings[0].redis_url, "", "")
            try:
                await NamesrvConfig(RouteStore(client, self.namespace)).update(props)
            finally:
                await client.aclose()
        asyncio.run_coroutine_threadsafe(update(), self._loop).result(10)

    def close(self) -> None:
        for stop in self._stops:
            self._loop.call_soon_threadsafe(stop.set)
        for task in self._tasks:
            with contextlib.suppress(Exception):  # already stopped, or failed: tests report it
                task.result(15)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()
        structlog.configure(**self._structlog_config)

    def __enter__(self) -> Fleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
