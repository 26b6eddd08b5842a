"""The real RocketMQ 4.9.8 pieces shared by the acceptance tests: one Java NameServer, one fleet of
two nsfleet workers, and one broker registered with all three, started once per session (a JVM
costs seconds); tests that kill or stop a broker start their own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nsfleet.redis_server import RedisServer
from tests.support import java_rocketmq as jr
from tests.support.workers import WorkerProcess, started

NAMESPACE = "java-acceptance"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/java/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.java)
            item.add_marker(pytest.mark.redis)


@pytest.fixture(scope="session")
def java_home() -> Path:
    return jr.require()


@pytest.fixture(scope="session")
def nsadmin(java_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """NsAdmin.class, compiled for this session."""
    return jr.compile_tool(tmp_path_factory.mktemp("nsadmin"))


@pytest.fixture(scope="session")
def java_ns(java_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[jr.NameServer]:
    with jr.namesrv(tmp_path_factory.mktemp("java-namesrv")) as ns:
        yield ns


def fleet_env(redis_server: RedisServer, namespace: str) -> dict[str, str]:
    return {"NSFLEET_REDIS_URL": redis_server.url, "NSFLEET_NAMESPACE": namespace,
            "NSFLEET_SWEEP_INTERVAL": "1", "NSFLEET_DRAIN_TIMEOUT": "1"}


@pytest.fixture(scope="session")
def fleet(java_home: Path, redis_server: RedisServer,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[WorkerProcess]]:
    with started(fleet_env(redis_server, NAMESPACE), tmp_path_factory.mktemp("fleet"),
                 count=2) as workers:
        yield workers


def remoting(worker: WorkerProcess) -> str:
    return f"127.0.0.1:{worker.remoting_port}"


@pytest.fixture(scope="session")
def every_ns(fleet: list[WorkerProcess], java_ns: jr.NameServer) -> list[str]:
    """The fleet's workers and the Java NameServer (last), as a broker's namesrvAddr lists them."""
    return [*(remoting(w) for w in fleet), java_ns.addr]


@pytest.fixture(scope="session")
def broker_a(every_ns: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[jr.Broker]:
    """broker-a of DefaultCluster, registered with both workers and the Java NameServer."""
    with jr.broker(";".join(every_ns), tmp_path_factory.mktemp("brokers") / "broker-a") as b:
        for ns in every_ns:
            jr.wait_registered(ns, "broker-a", b.addr)
        yield b
