"""Issue 41's acceptance: real RocketMQ 5.3.3 brokers in controller mode (automatic master
failover) with the fleet as their controller. The brokers' ``controllerAddr`` and ``namesrvAddr``
are both the two workers' remoting addresses (docs/controller.md).

With ``NSFLEET_CONTROLLER_UNDER_TEST=java`` the same tests run against Java's controller (the
DLedger controller in the Java NameServer 5.3.3, scanning every second as the fleet's sweep
does) and its NameServer: the check that the tests themselves are right. The one test that kills
a worker needs a fleet and is skipped there.

One pair of broker-a replicas serves the module; each test starts from a healthy pair (a master,
the other replica in its SyncStateSet, both in the route), restoring it first when an earlier
test left it broken. Messages: ``e2e.sh``, 200 on a fresh topic each time; through the
failovers, a producer sending without pause (``tests/java/FailoverLoad.java``)."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nsfleet.cli import main
from tests.java.conftest import fleet_env
from tests.support import java_rocketmq5 as jr5
from tests.support.java_rocketmq5 import ControllerBroker, ReplicaInfo
from tests.support.workers import WorkerProcess, started

UNDER_TEST = os.environ.get("NSFLEET_CONTROLLER_UNDER_TEST", "nsfleet")
NAMESPACE = "java-controller"
N = 200
HEARTBEAT_TIMEOUT = int(jr5.CONTROLLER_MODE["controllerHeartBeatTimeoutMills"]) / 1000
SCAN_SLACK = 6.0  # s after the heartbeat timeout: a 1 s scan, the 904 interval, a busy machine
START_BOUND = 60.0  # s: a JVM start, ids, the first election, the slave caught up (2 cores)
FAILOVER_BOUND = 15.0  # s: kill -9 → the slave elected and registered as brokerId 0
REJOIN_BOUND = 60.0  # s: an old master back as slave, in the SyncStateSet again

pytestmark = pytest.mark.timeout(240)


@dataclass
class Plane:
    """What the brokers are pointed at: name servers and controllers (the same workers for
    nsfleet; Java's NameServer and its controller port for java)."""

    namesrv_addrs: list[str]
    controller_addrs: list[str]
    workers: list[WorkerProcess] = field(default_factory=list)

    @property
    def ns(self) -> str:
        return ";".join(self.namesrv_addrs)

    @property
    def ctl(self) -> str:
        return ";".join(self.controller_addrs)

    def ask(self) -> str:
        """A controller address to query: the first live worker's (a test may kill one)."""
        for w in self.workers:
            if w.process is not None and w.process.poll() is None:
                return remoting(w)
        return self.controller_addrs[0]

    def ask_ns(self) -> str:
        return self.ask() if self.workers else self.namesrv_addrs[0]


def remoting(worker: WorkerProcess) -> str:
    return f"127.0.0.1:{worker.remoting_port}"


@pytest.fixture(scope="module")
def plane(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    jr5.require()
    if UNDER_TEST == "java":
        # Java scans for dead brokers and masterless sets every 5 s; every 1 s here, as the
        # fleet's sweep (NSFLEET_SWEEP_INTERVAL=1), so one time bound fits both.
        with jr5.java_controller(tmp_path_factory.mktemp("java-controller"),
                                 scanNotActiveBrokerInterval="1000",
                                 scanInactiveMasterInterval="1000") as jc:
            yield Plane([jc.ns_addr], [jc.ctl_addr])
        return
    assert UNDER_TEST == "nsfleet", f"NSFLEET_CONTROLLER_UNDER_TEST={UNDER_TEST}: nsfleet|java"
    redis_server = request.getfixturevalue("redis_server")
    with started(fleet_env(redis_server, NAMESPACE), tmp_path_factory.mktemp("ctl-fleet"),
                 count=2) as workers:
        addrs = [remoting(w) for w in workers]
        yield Plane(addrs, list(addrs), workers)


@dataclass
class BrokerSet:
    name: str
    brokers: list[ControllerBroker]
    started_at: float

    def by_addr(self, addr: str | None) -> ControllerBroker | None:
        return next((b for b in self.brokers if b.addr == addr), None)

    def logs(self) -> str:
        return "\n".join(f"--- {b.name} ({b.addr}) broker.log:\n{b.log_tail(1500)}"
                         for b in self.brokers)


@contextlib.contextmanager
def broker_set(plane: Plane, name: str, work: Path, count: int = 2) -> Iterator[BrokerSet]:
    """``count`` replicas of ``name``, started one after the other (each listening before the
    next starts); killed afterwards."""
    with contextlib.ExitStack() as stack:
        t0 = time.monotonic()
        brokers = [stack.enter_context(jr5.controller_broker(
            plane.ns, plane.ctl, work / f"{name}-{i}", brokerName=name)) for i in range(count)]
        yield BrokerSet(name, brokers, t0)


@pytest.fixture(scope="module")
def set_a(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerSet]:
    with broker_set(plane, "broker-a", tmp_path_factory.mktemp("ctl-brokers")) as bs:
        yield bs


@dataclass
class Healthy:
    master: ControllerBroker
    slaves: list[ControllerBroker]
    info: ReplicaInfo
    route: dict[int, str]

    @property
    def slave(self) -> ControllerBroker:
        return self.slaves[0]

    def id_of(self, broker: ControllerBroker) -> int | None:
        """Its controller id (the route lists the master as 0, not under its id)."""
        if broker is self.master:
            return self.info.master_broker_id
        return next(i for i, addr in self.route.items() if addr == broker.addr)


def healthy(plane: Plane, bs: BrokerSet) -> Healthy | None:
    """The set as it should be: the controller's master is one of its replicas, every replica
    is in the SyncStateSet, and the route lists the master as brokerId 0 and each slave under
    its controller id."""
    info = jr5.replica_info(plane.ask(), bs.name)
    master = bs.by_addr(info.master_address)
    if master is None or len(info.sync_state_set) != len(bs.brokers):
        return None
    route = jr5.route_members(plane.ask_ns(), bs.name)
    if route.get(0) != master.addr or sorted(route.values()) != sorted(b.addr
                                                                       for b in bs.brokers):
        return None
    if (set(route) - {0}) | {info.master_broker_id} != info.sync_state_set:
        return None
    return Healthy(master, [b for b in bs.brokers if b is not master], info, route)


def describe(plane: Plane, bs: BrokerSet) -> str:
    return (f"controller {plane.ask()} says {jr5.replica_info(plane.ask(), bs.name)}; route "
            f"{jr5.route_members(plane.ask_ns(), bs.name)}\n{bs.logs()}")


def restore(plane: Plane, bs: BrokerSet, bound: float = START_BOUND) -> Healthy:
    """Every replica running again (restarted, SIGCONTed), then the set healthy."""
    for b in bs.brokers:
        if b.alive():
            b.sigcont()  # harmless on a running one
        else:
            b.restart()
    state, _ = jr5.wait_for(lambda: healthy(plane, bs), bound, 0.5)
    assert state, f"{bs.name} not healthy {bound} s on: {describe(plane, bs)}"
    return state


Poll = Callable[[], ReplicaInfo | None]


def master_is(plane: Plane, bs: BrokerSet, broker: ControllerBroker) -> Poll:
    """A poll for the controller naming ``broker`` the set's master."""
    def check() -> ReplicaInfo | None:
        info = jr5.replica_info(plane.ask(), bs.name)
        return info if info.master_address == broker.addr else None
    return check


def routed_as_master(plane: Plane, bs: BrokerSet, broker: ControllerBroker) -> Callable[[], bool]:
    """A poll for the route listing ``broker`` as brokerId 0 (it re-registered as master)."""
    return lambda: jr5.route_members(plane.ask_ns(), bs.name).get(0) == broker.addr


def assert_delivered(plane: Plane, ns: str | None = None) -> jr5.Delivery:
    d = jr5.messages(ns or plane.ns, None, N)
    assert d.ok and d.received == N, f"{d.sent} sent, {d.received} of {N} received:\n{d.output}"
    return d


# --- (a) ----------------------------------------------------------------------------------------


def test_master_elected_and_slave_joins_then_messages_flow(plane: Plane,
                                                           set_a: BrokerSet) -> None:
    def elected() -> ReplicaInfo | None:
        info = jr5.replica_info(plane.ask(), "broker-a")
        return info if set_a.by_addr(info.master_address) else None

    first, _ = jr5.wait_for(elected, START_BOUND)
    elected_after = time.monotonic() - set_a.started_at
    assert first, f"no master elected: {describe(plane, set_a)}"
    state = restore(plane, set_a)
    joined_after = time.monotonic() - set_a.started_at
    assert state.info.sync_state_set == {1, 2}, state.info
    for addr in plane.controller_addrs:  # one state, whichever worker is asked
        assert jr5.replica_info(addr, "broker-a") == state.info, addr
    d = assert_delivered(plane)
    print(f"master elected {elected_after:.1f} s after the first start, SyncStateSet "
          f"{sorted(state.info.sync_state_set)} at {joined_after:.1f} s; {d.received}/{N} "
          f"in {d.seconds:.1f} s")


# --- (b), (c): kill -9 and SIGSTOP, messages flowing throughout --------------------------------


def _killed(plane: Plane, bs: BrokerSet, s: Healthy) -> tuple[float, float]:
    """(b) kill -9 of the master: the slave elected with a higher masterEpoch and a SyncStateSet
    of itself alone, then routed as brokerId 0; the old master restarted comes back as a slave
    under its own id. (seconds to the election, to the route flip)"""
    old, new = s.master, s.slave
    old_id = s.id_of(old)
    t0 = time.monotonic()
    old.kill9()
    info, elected = jr5.wait_for(master_is(plane, bs, new), FAILOVER_BOUND, 0.05)
    assert info, f"{new.addr} not elected after kill -9 of {old.addr}: {describe(plane, bs)}"
    assert info.master_epoch is not None and s.info.master_epoch is not None
    assert info.master_epoch > s.info.master_epoch, (s.info, info)
    assert info.sync_state_set == {info.master_broker_id}, info
    flipped, _ = jr5.wait_for(routed_as_master(plane, bs, new), FAILOVER_BOUND, 0.05)
    assert flipped, f"route never listed {new.addr} as brokerId 0: {describe(plane, bs)}"
    routed = time.monotonic() - t0
    old.restart()
    back = restore(plane, bs, REJOIN_BOUND)
    assert back.master is new, f"{back.master.addr} is master, not {new.addr}"
    assert back.route.get(old_id) == old.addr, f"old master not back as id {old_id}: {back.route}"
    return elected, routed


def _frozen(plane: Plane, bs: BrokerSet, s: Healthy) -> tuple[float, float]:
    """(c) SIGSTOP of the master: its connection stays open, so only its missed heartbeats may
    decide; the slave is elected at the heartbeat timeout, and the frozen one SIGCONT'd comes
    back as a slave. (seconds to the election, to the route flip)"""
    frozen, new = s.master, s.slave
    t0 = time.monotonic()
    frozen.sigstop()
    try:
        info, elected = jr5.wait_for(master_is(plane, bs, new),
                                     HEARTBEAT_TIMEOUT + SCAN_SLACK, 0.1)
        assert info, (f"{new.addr} not elected {HEARTBEAT_TIMEOUT + SCAN_SLACK} s after "
                      f"SIGSTOP of {frozen.addr}: {describe(plane, bs)}")
        # The last heartbeat came at most a second before the SIGSTOP.
        assert elected > HEARTBEAT_TIMEOUT - 1.5, f"elected after {elected:.2f} s only"
        flipped, _ = jr5.wait_for(routed_as_master(plane, bs, new), FAILOVER_BOUND, 0.1)
        assert flipped, f"route never listed {new.addr} as brokerId 0: {describe(plane, bs)}"
        routed = time.monotonic() - t0
    finally:
        frozen.sigcont()
    back = restore(plane, bs, REJOIN_BOUND)
    assert back.master is new and frozen in back.slaves, describe(plane, bs)
    return elected, routed


@pytest.mark.timeout(480)
def test_failovers_lose_no_acknowledged_message(plane: Plane, set_a: BrokerSet,
                                                tmp_path: Path) -> None:
    """A producer sends every 10 ms through (b) a kill -9 of the master and its return as slave,
    then (c) a SIGSTOP of the new master and its return: every message acknowledged (SEND_OK,
    with allAckInSyncStateSet=true) is received."""
    s = restore(plane, set_a)
    topic = f"CtlLoad{uuid.uuid4().hex[:8]}"
    made = jr5.messages(plane.ns, topic, 10)
    assert made.ok, made.output
    with jr5.failover_load(plane.ns, topic, tmp_path) as load:
        def flowing(what: str) -> None:
            if load.acked_past(load.progress().acked + 50, FAILOVER_BOUND + 15):
                return
            route = jr5.call(plane.ask_ns(), jr5.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            pytest.fail(f"no messages acknowledged {what}: {load.progress()}, "
                        f"{describe(plane, set_a)}\nroute of {topic}: {route}\n"
                        f"--- the client:\n{load.abort()}")

        flowing("at the start")
        killed = _killed(plane, set_a, s)
        flowing("after the kill -9 and the old master's return")
        frozen = _frozen(plane, set_a, restore(plane, set_a))
        flowing("after the SIGSTOP and the frozen master's return")
        r = load.finish()
    assert r.lost == 0, f"{r.lost} acknowledged messages lost ({r.lost_ids}):\n{r.output}"
    assert r.received >= r.acked
    print(f"kill -9: elected {killed[0]:.2f} s, route {killed[1]:.2f} s; SIGSTOP "
          f"({HEARTBEAT_TIMEOUT:.0f} s timeout): elected {frozen[0]:.2f} s, route "
          f"{frozen[1]:.2f} s; {r.acked} acknowledged, all received; {r.failed} sends failed; "
          f"longest gap between acknowledgements {r.longest_gap_ms} ms")


# --- moved from Java's controller ------------------------------------------------------------


@pytest.mark.timeout(480)
def test_set_moved_from_a_java_controller_keeps_ids_master_and_epochs(
        plane: Plane, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/controller.md's move, live: a set elected by Java's controller (its epochs past 1)
    is imported with ``nsfleet admin controller-import``, each replica restarted pointing at the
    workers (slaves first), and the fleet carries on from Java's epochs."""
    if not plane.workers:
        pytest.skip("moves a set from Java's controller to the fleet")
    with jr5.java_controller(tmp_path / "java-ctl", scanNotActiveBrokerInterval="1000",
                             scanInactiveMasterInterval="1000") as jc:
        on_java = Plane(plane.namesrv_addrs, [jc.ctl_addr])
        with broker_set(on_java, "broker-m", tmp_path) as bs:
            s = restore(on_java, bs)
            s.master.kill9()  # a failover first, so that Java's epochs are past the first ones
            assert jr5.wait_for(master_is(on_java, bs, s.slave), FAILOVER_BOUND, 0.1)[0]
            java = restore(on_java, bs, REJOIN_BOUND)
            assert java.info.master_epoch is not None and java.info.master_epoch >= 2

            capsys.readouterr()
            assert main(["admin", "--server", plane.workers[0].url, "controller-import",
                         "--from", jc.ctl_addr, "--grace", "90", "broker-m"]) == 0, (
                capsys.readouterr())
            fleet = jr5.replica_info(plane.ask(), bs.name)
            assert (fleet.master_broker_id, fleet.master_address, fleet.master_epoch,
                    fleet.sync_state_set, fleet.sync_state_set_epoch) == (
                java.info.master_broker_id, java.info.master_address, java.info.master_epoch,
                java.info.sync_state_set, java.info.sync_state_set_epoch), (fleet, java.info)

            t0 = time.monotonic()
            for b in [*java.slaves, java.master]:
                b.point_at(plane.ctl)
            moved = restore(plane, bs, REJOIN_BOUND)
            took = time.monotonic() - t0
            assert moved.master is java.master, describe(plane, bs)
            assert moved.info.master_epoch == java.info.master_epoch, moved.info
            assert moved.route == java.route, (moved.route, java.route)
            assert_delivered(plane)

            # Java's controller gone: the fleet's own failover continues Java's epochs.
            jc.stop()
            moved.master.kill9()
            after = jr5.wait_for(master_is(plane, bs, moved.slave), FAILOVER_BOUND, 0.05)[0]
            assert after, describe(plane, bs)
            assert after.master_epoch == java.info.master_epoch + 1, after
            assert jr5.wait_for(routed_as_master(plane, bs, moved.slave), FAILOVER_BOUND)[0]
            d = assert_delivered(plane)
    print(f"moved from Java's controller at masterEpoch {java.info.master_epoch}: every replica "
          f"on the fleet {took:.1f} s after the first restart; kill -9 then elected masterEpoch "
          f"{after.master_epoch}; {d.received}/{N}")


# --- (e) ----------------------------------------------------------------------------------------


def test_two_broker_sets_each_get_their_own_master(plane: Plane, set_a: BrokerSet,
                                                   tmp_path: Path) -> None:
    a = restore(plane, set_a)
    with broker_set(plane, "broker-b", tmp_path) as broker_b:
        b = restore(plane, broker_b)
        took = time.monotonic() - broker_b.started_at
        assert b.info.sync_state_set == {1, 2}, f"broker-b's ids are its own: {b.info}"
        assert jr5.replica_info(plane.ask(), "broker-a") == a.info, "broker-a changed"
        d = assert_delivered(plane)  # the fresh topic is on both masters
    print(f"broker-b healthy {took:.1f} s after its start, broker-a untouched; {d.received}/{N}"
          f" over both sets in {d.seconds:.1f} s")


# --- every worker restarted ---------------------------------------------------------------------


def test_every_worker_restarted_keeps_the_master_and_its_epoch(plane: Plane,
                                                               set_a: BrokerSet) -> None:
    """The whole fleet stopped (SIGTERM) and started again on the same ports: the controller's
    state is in Redis, so the master and masterEpoch stay, and the brokers carry on."""
    if not plane.workers:
        pytest.skip("restarts the fleet's workers: Java's controller here is one process")
    s = restore(plane, set_a)
    for w in plane.workers:
        w.stop()
    time.sleep(2.0)  # the brokers' requests fail meanwhile
    for w in plane.workers:
        w.start()
    assert [remoting(w) for w in plane.workers] == plane.controller_addrs, "ports moved"
    t0 = time.monotonic()
    # Past a heartbeat timeout and a scan: nothing may expire while the brokers reconnect.
    while time.monotonic() - t0 < HEARTBEAT_TIMEOUT + SCAN_SLACK:
        info = jr5.replica_info(plane.ask(), "broker-a")
        assert (info.master_address, info.master_epoch) == (s.master.addr, s.info.master_epoch), (
            f"{time.monotonic() - t0:.1f} s after the restart: {info}, was {s.info}")
        time.sleep(0.5)
    back = restore(plane, set_a)
    assert back.master is s.master and back.info.master_epoch == s.info.master_epoch
    d = assert_delivered(plane)
    print(f"whole fleet restarted: master {s.master.addr} and masterEpoch "
          f"{s.info.master_epoch} kept; {d.received}/{N} after")


# --- (d) ----------------------------------------------------------------------------------------


def test_killed_worker_causes_no_failover(plane: Plane, set_a: BrokerSet) -> None:
    if not plane.workers:
        pytest.skip("kills a worker of the fleet: Java's controller here is one process")
    s = restore(plane, set_a)
    leader = s.master.controller_leader()
    victim = next((w for w in plane.workers if remoting(w) == leader), None)
    assert victim is not None, f"the master talks to {leader}, no worker of {plane.ctl}"
    survivor = next(w for w in plane.workers if w is not victim)
    assert victim.process is not None

    def on_survivor() -> bool:
        return all(b.controller_leader() == remoting(survivor) for b in set_a.brokers)

    victim.process.kill()
    victim.process.wait()
    try:
        # Longer than a heartbeat timeout and a scan: a dead worker is not a dead master.
        t0 = time.monotonic()
        moved_after: float | None = None
        while (watched := time.monotonic() - t0) < HEARTBEAT_TIMEOUT + SCAN_SLACK:
            info = jr5.replica_info(remoting(survivor), "broker-a")
            assert (info.master_address, info.master_epoch) == (
                s.master.addr, s.info.master_epoch), (
                f"{watched:.1f} s after the worker's kill: {info}, was {s.info}")
            if moved_after is None and on_survivor():
                moved_after = watched
            time.sleep(0.5)
        if moved_after is None:
            moved, _ = jr5.wait_for(on_survivor, 15.0, 0.5)
            assert moved, (f"brokers still on {[b.controller_leader() for b in set_a.brokers]}"
                           f", not {remoting(survivor)}")
            moved_after = time.monotonic() - t0
        d = assert_delivered(plane, remoting(survivor))
        assert healthy(plane, set_a) is not None, describe(plane, set_a)
        after = jr5.replica_info(remoting(survivor), "broker-a")
        assert after.master_epoch == s.info.master_epoch, (after, s.info)
    finally:
        victim.start()  # the module's fleet whole again for whatever runs next
    print(f"worker {leader} kill -9: masterEpoch {s.info.master_epoch} kept "
          f"{HEARTBEAT_TIMEOUT + SCAN_SLACK:.0f} s and after; brokers on {remoting(survivor)} "
          f"{moved_after:.1f} s after the kill; {d.received}/{N} through it")
