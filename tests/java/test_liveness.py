"""Issue 30: brokers leaving, side by side with the Java NameServer 4.9.8. A SIGKILLed broker's
connections close: gone from every name server at once. A SIGSTOPped one keeps its connections
open and goes silent: gone after the broker timeout, through the sweep (4.9.8's is fixed: 120 s
after the last registration, found by a scan every 10 s; a 4.9.8 broker sends no
heartbeatTimeoutMillis, so nsfleet's --broker-timeout, 120 s, applies). That one wait runs in the
background from the module's start while the other tests run. A master and a slave of one group:
the master killed, clients read from the fleet what they read from the Java NameServer."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.java.answers import by_ns
from tests.support import java_rocketmq as jr

SILENT_BOUND = 180.0  # s: 120 s timeout + Java's 10 s scan + a slow CI machine's slack


class GoneWatch:
    """Polls each name server's 106 from ``since`` and notes when ``name`` left it."""

    def __init__(self, every_ns: list[str], name: str, bound: float) -> None:
        self.every_ns, self.name, self.bound = every_ns, name, bound
        self.since = time.monotonic()
        self.gone: dict[str, float] = {}
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while len(self.gone) < len(self.every_ns):
            elapsed = time.monotonic() - self.since
            if elapsed > self.bound:
                return
            for ns in self.every_ns:
                if ns not in self.gone and self.name not in jr.broker_addrs(ns):
                    self.gone[ns] = time.monotonic() - self.since
            time.sleep(0.05)

    def wait(self) -> dict[str, float]:
        self.thread.join(self.bound + 10)
        return self.gone


@pytest.fixture(scope="module", autouse=True)
def silent_watch(every_ns: list[str], tmp_path_factory: pytest.TempPathFactory,
                 ) -> Iterator[GoneWatch]:
    """broker-silent, registered everywhere, then SIGSTOPped at once (its last registration is
    the one at start-up) and watched from then on."""
    store = tmp_path_factory.mktemp("silent") / "broker-silent"
    with jr.broker(";".join(every_ns), store, "brokerName=broker-silent") as b:
        for ns in every_ns:
            jr.wait_registered(ns, "broker-silent", b.addr)
        b.signal(signal.SIGSTOP)
        yield GoneWatch(every_ns, "broker-silent", SILENT_BOUND)


def test_sigkilled_broker_leaves_every_name_server_at_once(
        broker_a: jr.Broker, every_ns: list[str], tmp_path: Path) -> None:
    with jr.broker(";".join(every_ns), tmp_path / "broker-killed",
                   "brokerName=broker-killed") as b:
        for ns in every_ns:
            jr.wait_registered(ns, "broker-killed", b.addr)
        b.signal(signal.SIGKILL)
        gone = GoneWatch(every_ns, "broker-killed", 30.0).wait()
    print(f"SIGKILL: gone after (s) {gone}")
    assert set(gone) == set(every_ns), gone  # well before the 120 s sweep


READS = ("route|TBW102", "route|broker-ms", "cluster", "topics")


def test_master_killed_clients_see_what_java_shows(broker_a: jr.Broker, every_ns: list[str],
                                                   nsadmin: Path, tmp_path: Path) -> None:
    group = ("brokerName=broker-ms",)
    with jr.broker(";".join(every_ns), tmp_path / "master", *group) as master, \
            jr.broker(";".join(every_ns), tmp_path / "slave", *group, "brokerId=1",
                      "brokerRole=SLAVE") as slave:
        for ns in every_ns:
            jr.wait_registered(ns, "broker-ms", master.addr)
            jr.wait_registered(ns, "broker-ms", slave.addr, "1")
        before = by_ns(jr.admin(nsadmin, every_ns, *READS))
        master.signal(signal.SIGKILL)
        for ns in every_ns:
            deadline = time.monotonic() + 30
            while "0" in jr.broker_addrs(ns).get("broker-ms", {}):
                assert time.monotonic() < deadline, f"{ns} still lists the dead master"
                time.sleep(0.05)
        after = by_ns(jr.admin(nsadmin, every_ns, *READS))
    java = every_ns[-1]
    assert before[java]["route|broker-ms"]["brokerDatas"][0]["brokerAddrs"] == {
        "0": master.addr, "1": slave.addr}
    assert after[java]["route|broker-ms"]["brokerDatas"][0]["brokerAddrs"] == {"1": slave.addr}
    for worker in every_ns[:-1]:
        assert before[worker] == before[java], worker
        assert after[worker] == after[java], worker


def test_silent_broker_expires_through_the_sweep_as_in_java(silent_watch: GoneWatch,
                                                            every_ns: list[str]) -> None:
    gone = silent_watch.wait()
    print(f"SIGSTOP: gone after (s) {gone}")
    assert set(gone) == set(every_ns), gone
    # Kept while its connection stays open and its timeout runs: neither side drops it early.
    assert min(gone.values()) > 100, gone
