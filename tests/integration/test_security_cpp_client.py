"""The C++ client itself (librocketmq 2.x through the ``rocketmq-python-cvs`` package) against a
worker with access control: without credentials it still signs every request, with an empty
AccessKey, OnsChannel and an HMAC keyed with an empty secret (issue 26); with
``--acl-anonymous-reads`` that is an anonymous read. The client runs in a child process (its
library starts threads and writes logs under $HOME); the test skips where the package or its
library cannot be loaded (it ships a Linux x86_64 library only)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from nsfleet.redis_server import RedisServer
from tests.support.acl_signer import java_sign
from tests.support.cpp_client import missing
from tests.support.remoting_client import (
    SUCCESS,
    Broker,
    Command,
    TopicConf,
    Worker,
    running_worker,
)

pytestmark = pytest.mark.redis

ACCOUNTS = """
accounts:
  - {accessKey: rocketmq2, secretKey: "12345678", admin: true}
  - {accessKey: reader, secretKey: reader-secret}
"""
# A broker address on loopback with nothing listening: the client only asks for the route.
BROKER = Broker("c1", "127.0.0.1:10911", "broker-cpp", 0, "127.0.0.1:10912",
                [TopicConf("CppTopic", 4, 4), TopicConf("CppOther", 2, 2)])

# Asks the name server for the route of a topic (FetchSubscriptionMessageQueues: one
# GET_ROUTEINFO_BY_TOPIC, no broker contacted); prints "rc queues".
SCRIPT = r"""
import ctypes, sys
try:
    from rocketmq.client import PullConsumer, dll
    from rocketmq.ffi import _CMessageQueue
except (ImportError, OSError) as exc:
    print("UNAVAILABLE", exc)
    sys.exit(0)
consumer = PullConsumer("GID_nsfleet_cpp")
consumer.set_namesrv_addr(sys.argv[1])
if len(sys.argv) > 3:
    consumer.set_session_credentials(sys.argv[3], sys.argv[4], "ALIYUN")
consumer.start()
queues = ctypes.POINTER(_CMessageQueue)()
size = ctypes.c_int()
rc = dll.FetchSubscriptionMessageQueues(consumer._handle, sys.argv[2].encode(),
                                        ctypes.pointer(queues), ctypes.pointer(size))
print("RESULT", rc, size.value, flush=True)
consumer.shutdown()
"""


def cpp_route(worker: Worker, topic: str, tmp: Path, *creds: str) -> tuple[int, int]:
    """(the client's return code, queues) for one route lookup by the C++ client (a refused
    lookup returns 0 queues)."""
    try:
        out = subprocess.run([sys.executable, "-c", SCRIPT, f"127.0.0.1:{worker.port}", topic,
                              *creds], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "HOME": str(tmp)}, cwd=tmp).stdout
    except subprocess.TimeoutExpired:
        pytest.fail("the C++ client hung")
    if out.startswith("UNAVAILABLE"):
        missing(f"the C++ client (rocketmq-python-cvs) cannot be loaded here: {out}")
    found = re.search(r"RESULT (-?\d+) (\d+)", out)
    assert found, out
    return int(found.group(1)), int(found.group(2))


async def denied(worker: Worker) -> dict[tuple[str, str], float]:
    async with aiohttp.ClientSession() as http, http.get(f"{worker.http_url}/metrics") as resp:
        text = await resp.text()
    return {(m[0], m[1]): float(m[2]) for m in re.findall(
        r'nsfleet_access_denied_total\{protocol="remoting",reason="(\w+)",served="(\w+)"\} '
        r'(\S+)', text)}


@pytest.fixture(autouse=True)
def _has_client() -> None:
    import importlib.util

    if importlib.util.find_spec("rocketmq") is None:
        missing("the C++ client (rocketmq-python-cvs) is not installed")


@pytest.mark.parametrize("mode", ["enforcing", "permissive"])
async def test_cpp_client_without_credentials_is_anonymous(
        redis_server: RedisServer, tmp_path: Path, mode: str) -> None:
    acl = tmp_path / "acl.yml"
    acl.write_text(ACCOUNTS)
    async with running_worker(redis_server.url, acl_mode=mode, acl_file=str(acl),
                              acl_anonymous_reads=True) as worker:
        client = await worker.connect()
        try:
            register = BROKER.register_5x()
            signed = Command(103, java_sign(dict(register.ext_fields or {}), register.body,
                                            "rocketmq2", "12345678"), register.body)
            assert (await client.call(signed)).code == SUCCESS
            # (the registering connection stays open: its close would unregister the broker)
            rc, queues = await asyncio.to_thread(cpp_route, worker, "CppTopic", tmp_path)
            assert (rc, queues) == (0, 4)  # served: the route's four read queues
            # with the right credentials too, and a wrong secret is refused
            assert await asyncio.to_thread(cpp_route, worker, "CppTopic", tmp_path, "reader",
                                           "reader-secret") == (0, 4)
            wrong = await asyncio.to_thread(cpp_route, worker, "CppTopic", tmp_path, "reader",
                                            "not-the-secret")
            counts = await denied(worker)
        finally:
            await client.close()
    assert wrong[1] == (0 if mode == "enforcing" else 4)  # refused: no queues (enforcing)
    assert counts.get(("unsigned", "true" if mode == "permissive" else "false"), 0) == 0
    assert counts.get(("unknown_account", "true"), 0) == counts.get(
        ("unknown_account", "false"), 0) == 0
    assert sum(v for (reason, _), v in counts.items() if reason == "bad_signature") >= 1
