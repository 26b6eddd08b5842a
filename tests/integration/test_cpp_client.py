"""Issue 23: a real RocketMQ client finds the fleet through the address server. The C++ 2.x client
from PyPI (``rocketmq-python-cvs``, librocketmq bundled; the test extra installs it on Linux
x86_64) is given only a name-server domain,
``set_namesrv_domain("http://127.0.0.1:PORT/rocketmq/nsaddr")``; it fetches the NameServer list
there (it does so only when ``$HOME/logs/rocketmq-cpp/snapshot`` exists), reads the topic's route
from a worker and sends a message to the broker the route names (a stand-in that answers
SEND_MESSAGE). Skipped where the client cannot be imported (tests/support/cpp_client.py)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsfleet.redis_server import RedisServer, free_port
from nsfleet.wire.codec import FrameDecoder, encode_frame, make_response
from tests.support.cpp_client import missing
from tests.support.fleet import Fleet

pytestmark = pytest.mark.redis

SEND_MESSAGE, SEND_MESSAGE_V2 = 10, 310
PRODUCER = """
import sys
from rocketmq.client import Message, Producer
producer = Producer("PID_nsfleet_address_server")
producer.set_namesrv_domain(sys.argv[1])
producer.start()
message = Message(sys.argv[2])
message.set_body("through the address server")
result = producer.send_sync(message)
print("SENT", int(result.status), flush=True)
producer.shutdown()
"""


def _client_importable() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import rocketmq.client"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


class StandInBroker:
    """Answers every request SUCCESS, SEND_MESSAGE with a SendMessageResponseHeader; records
    the codes it got."""

    def __init__(self) -> None:
        self.port = free_port()
        self.codes: list[int] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                for cmd in decoder.feed(data):
                    self.codes.append(cmd.code)
                    if cmd.is_oneway:
                        continue
                    ext = ({"msgId": "7F00000100002A9F0000000000000000", "queueId": "0",
                            "queueOffset": "0"} if cmd.code in (SEND_MESSAGE, SEND_MESSAGE_V2)
                           else {})
                    writer.write(encode_frame(make_response(cmd, 0, ext_fields=ext)))
        writer.close()

    def __enter__(self) -> StandInBroker:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", self.port), self._loop).result(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


@pytest.fixture
def broker() -> Iterator[StandInBroker]:
    with StandInBroker() as b:
        yield b


def test_the_cpp_client_finds_the_fleet_by_its_name_server_domain(
        redis_server: RedisServer, broker: StandInBroker, tmp_path: Path) -> None:
    if not _client_importable():
        missing("the RocketMQ C++ client (pip install rocketmq-python-cvs) is not installed")
    with Fleet(redis_server.url, workers=2) as fleet:
        fleet.post("/v1/brokers/register", {
            "clusterName": "c1", "brokerName": "broker-a", "brokerId": 0,
            "brokerAddr": f"127.0.0.1:{broker.port}",
            "topicConfigTable": {"TopicTest": {"readQueueNums": 4, "writeQueueNums": 4},
                                 "TBW102": {"perm": 7}}})
        home = tmp_path / "home"
        (home / "logs" / "rocketmq-cpp" / "snapshot").mkdir(parents=True)
        domain = f"{fleet.urls[0]}/rocketmq/nsaddr"
        run = subprocess.run([sys.executable, "-c", PRODUCER, domain, "TopicTest"],
                             env={"HOME": str(home), "PATH": "/usr/bin:/bin"}, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "SENT 0" in run.stdout  # SendStatus.OK
        assert SEND_MESSAGE_V2 in broker.codes or SEND_MESSAGE in broker.codes
        metrics = ""
        for url in fleet.urls:
            with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
                metrics += resp.read().decode()
    # The list came from the address server, the route from a worker it listed.
    assert 'nsfleet_http_requests_total{method="GET",route="/rocketmq/{subgroup}",status="200"}' \
        in metrics
    assert 'nsfleet_remoting_requests_total{code="105",response="0"}' in metrics
