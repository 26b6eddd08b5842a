"""Fixtures of the remoting conformance tests: a running worker and a connected test client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from nsfleet.redis_server import RedisServer
from tests.support.remoting_client import RemotingClient, Worker, running_worker


@pytest.fixture
async def worker(redis_server: RedisServer) -> AsyncIterator[Worker]:
    async with running_worker(redis_server.url) as w:
        yield w


@pytest.fixture
async def client(worker: Worker) -> AsyncIterator[RemotingClient]:
    c = await worker.connect()
    yield c
    await c.close()
