"""A wrong --redis-url: the worker names the setting to check; started from a terminal it gives
up after a bounded wait with a non-zero exit, elsewhere (Kubernetes) it keeps waiting."""

from __future__ import annotations

import asyncio
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.exceptions import AuthenticationError

from nsfleet import worker
from nsfleet.redis_conn import redacted
from nsfleet.redis_server import free_port
from nsfleet.service.namesrv_config import NamesrvConfig
from nsfleet.store import RouteStore

REPO = Path(__file__).resolve().parents[2]


def _nowhere() -> tuple[RouteStore, NamesrvConfig, str]:
    url = f"redis://127.0.0.1:{free_port()}/0"
    store = RouteStore(aioredis.Redis.from_url(url), "papercut")
    return store, NamesrvConfig(store, static={}), url


async def test_gives_up_after_the_bound_and_names_the_setting() -> None:
    store, config, url = _nowhere()
    with pytest.raises(worker.RedisUnreachable) as caught:
        await worker._wait_for_redis(store, config, asyncio.Event(), where=url,
                                     give_up_after=0.6)
    message = str(caught.value)
    assert url in message and "within 0.6 s" in message
    assert message.endswith("check --redis-url / NSFLEET_REDIS_URL")
    await store.redis.aclose()


async def test_without_a_bound_it_keeps_waiting_until_stopped() -> None:
    store, config, url = _nowhere()
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(1.2, stop.set)
    began = time.monotonic()
    assert await worker._wait_for_redis(store, config, stop, where=url) is None
    assert time.monotonic() - began >= 1.0  # still retrying past any short bound
    await store.redis.aclose()


def test_the_setting_named_follows_the_failure() -> None:
    refused = ConnectionError("Connection refused")
    assert worker._setting_to_check(refused, embedded=False) == "--redis-url / NSFLEET_REDIS_URL"
    assert "NSFLEET_REDIS_PASSWORD" in worker._setting_to_check(
        AuthenticationError("WRONGPASS invalid username-password pair"), embedded=False)
    assert "--data-dir" in worker._setting_to_check(refused, embedded=True)
    assert redacted("redis://app:hunter2@redis:6379/0") == "redis://***@redis:6379/0"
    assert redacted("redis://redis:6379/0") == "redis://redis:6379/0"


def test_the_bound_applies_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty:
        def __init__(self, tty: bool) -> None:
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    monkeypatch.setattr(sys, "stdin", Tty(True))
    monkeypatch.setattr(sys, "stderr", Tty(True))
    assert worker._redis_wait_bound() == worker.TERMINAL_REDIS_WAIT
    monkeypatch.setattr(sys, "stdin", Tty(False))  # Kubernetes: no terminal
    assert worker._redis_wait_bound() is None


def test_serve_on_a_terminal_exits_non_zero_naming_the_setting() -> None:
    primary, secondary = pty.openpty()
    url = f"redis://127.0.0.1:{free_port()}/0"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nsfleet", "serve", "--redis-url", url, "--host", "127.0.0.1",
         "--http-port", str(free_port()), "--remoting-port", str(free_port()),
         "--log-format", "console"],
        cwd=REPO, stdin=secondary, stdout=secondary, stderr=secondary)
    os.close(secondary)
    output = b""
    deadline = time.monotonic() + worker.TERMINAL_REDIS_WAIT + 30
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([primary], [], [], 0.5)[0]:
                try:
                    output += os.read(primary, 65536)
                except OSError:  # the terminal closed with the process
                    break
        code = proc.wait(max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(primary)
    text = output.decode(errors="replace")
    assert code == 1, text[-2000:]
    assert "waiting for redis" in text and "--redis-url / NSFLEET_REDIS_URL" in text
    assert f"nsfleet serve: no answer from Redis at {url}" in text
