"""A small pure-Python model of the Java NameServer tables (RouteInfoManager's topicQueueTable,
brokerAddrTable, clusterAddrTable, brokerLiveTable and filterServerTable) with RouteInfoManager's
semantics (registerBroker, unRegisterBroker and its cascade, scanNotActiveBroker expiry,
pickupTopicRouteData, deleteTopic / registerTopic and wipeWritePermOfBrokerByLock /
addWritePermOfBrokerByLock as DefaultRequestProcessor calls them), plus nsfleet's documented
differences:

* a stateVersion-fenced registration removes the newcomer's address with the unregister cascade
  and writes nothing else; a rejected single-topic registration writes nothing (Java leaves the
  cluster entry and an empty BrokerData behind);
* unregister is synchronous; a closed connection removes a broker only when no other connection
  it registered over is open;
* the live row, its filter servers and deadline of (cluster, addr) are removed only by a removal
  naming the group that registered the address last;
* a removed group leaves every cluster that lists it (Java: only the cluster the removal names);
* a route lists only members with a live row and only groups with at least one, and shows a group
  with enableActingMaster and no live master without the write perm;
* no static topics.

Time is not modelled: the tests never let a live row reach its real TTL, and expiry is the sweep
run "as of" a future time, which removes every broker whose timeout is below the horizon.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from msgspec import structs

from nsfleet.domain.errors import RegistrationRejected
from nsfleet.domain.model import (
    DEFAULT_HEARTBEAT_TIMEOUT_MS,
    MASTER_ID,
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    BrokerRegistration,
    ClusterInfo,
    DataVersion,
    QueueData,
    RegisterResult,
    TopicRouteData,
)
from nsfleet.store import SweepResult


@dataclass
class Live:
    """brokerLiveTable row plus nsfleet's registration record."""

    name: str
    broker_id: int
    data_version: DataVersion
    timeout: int
    generation: int
    ha: str


@dataclass
class Group:
    """brokerAddrTable row."""

    cluster: str
    acting: bool
    zone: str
    members: dict[int, str]


class RouteModel:
    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}
        self.clusters: dict[str, set[str]] = {}
        self.queues: dict[str, dict[str, QueueData]] = {}
        self.live: dict[tuple[str, str], Live] = {}
        self.filters: dict[tuple[str, str], list[str]] = {}
        self.conns: dict[tuple[str, str], set[str]] = {}
        self.seq = 0

    # --- helpers -------------------------------------------------------------------------------

    def topics_of(self, name: str) -> list[str]:
        return sorted(t for t, qs in self.queues.items() if name in qs)

    def drop_queue(self, topic: str, name: str) -> None:
        del self.queues[topic][name]
        if not self.queues[topic]:
            del self.queues[topic]

    # --- RouteInfoManager.registerBroker -------------------------------------------------------

    def register(self, reg: BrokerRegistration, delete_absent: bool = False,
                 connection: str | None = None) -> RegisterResult:
        group = self.groups.get(reg.name)
        old_addr = group.members.get(reg.broker_id) if group else None
        # stateVersion fencing: an older stateVersion may not take over a live member's id.
        if old_addr is not None and old_addr != reg.addr:
            old = self.live.get((reg.cluster, old_addr))
            if old and old.data_version.state_version > reg.data_version.state_version:
                self.remove_broker(reg.cluster, reg.addr, reg.name)
                return RegisterResult(fenced=True)
        # Single-topic guard: a lone topic from an unknown id is refused.
        if old_addr is None and len(reg.topic_configs) == 1:
            raise RegistrationRejected
        # Add the name to its cluster, create the BrokerData, set enableActingMaster and zone.
        self.clusters.setdefault(reg.cluster, set()).add(reg.name)
        register_first = group is None
        if group is None:
            group = self.groups[reg.name] = Group(reg.cluster, False, "", {})
        group.acting = reg.enable_acting_master is True
        group.zone = reg.zone_name or ""
        # Slave/master switch: one address once per group; then put the id's address.
        for mid in [m for m, a in group.members.items() if a == reg.addr and m != reg.broker_id]:
            del group.members[mid]
        group.members[reg.broker_id] = reg.addr
        register_first = register_first or old_addr is None
        # A master or prime slave writes the topics that are new or changed.
        is_master = reg.broker_id == MASTER_ID
        prime_slave = (not is_master and reg.enable_acting_master is not None
                       and reg.broker_id == min(group.members))
        if is_master or prime_slave:
            stored = self.live.get((reg.cluster, reg.addr))
            dv_changed = stored is None or stored.data_version != reg.data_version
            for tc in reg.topic_configs:
                missing = reg.name not in self.queues.get(tc.topic_name, {})
                if register_first or dv_changed or missing:
                    perm = tc.perm
                    if prime_slave and group.acting:
                        perm &= ~PERM_WRITE
                    self.queues.setdefault(tc.topic_name, {})[reg.name] = QueueData(
                        reg.name, tc.read_queue_nums, tc.write_queue_nums, perm, tc.topic_sys_flag)
            if delete_absent:
                incoming = {tc.topic_name for tc in reg.topic_configs}
                for topic in self.topics_of(reg.name):
                    if topic not in incoming:
                        self.drop_queue(topic, reg.name)
        # The live row (BrokerLiveInfo), then the filter servers.
        self.seq += 1
        key = (reg.cluster, reg.addr)
        self.live[key] = Live(reg.name, reg.broker_id, replace(reg.data_version),
                              reg.heartbeat_timeout_millis or DEFAULT_HEARTBEAT_TIMEOUT_MS,
                              self.seq, reg.ha_server_addr or "")
        if connection is not None:
            self.conns.setdefault(key, set()).add(connection)
        if reg.filter_server_list is not None:
            if reg.filter_server_list:
                self.filters[key] = list(reg.filter_server_list)
            else:
                self.filters.pop(key, None)
        # A slave learns the master's address and HA address.
        master_addr = ha = None
        if not is_master and MASTER_ID in group.members:
            master = self.live.get((reg.cluster, group.members[MASTER_ID]))
            if master is not None:
                master_addr, ha = group.members[MASTER_ID], master.ha or None
        return RegisterResult(master_addr=master_addr, ha_server_addr=ha, generation=self.seq)

    # --- unregister and the cascade (RouteInfoManager.unRegisterBroker) ------------------------

    def remove_broker(self, cluster: str, addr: str, name: str) -> int:
        key = (cluster, addr)
        owner = self.live.get(key)
        if owner is None or owner.name == name:
            self.live.pop(key, None)
            self.filters.pop(key, None)
            self.conns.pop(key, None)
        group = self.groups.get(name)
        if group is None:
            return 0
        for mid in [m for m, a in group.members.items() if a == addr]:
            del group.members[mid]
        if not group.members:
            for topic in self.topics_of(name):
                self.drop_queue(topic, name)
            del self.groups[name]
            for c in list(self.clusters):  # nsfleet: every cluster that lists the name
                self.clusters[c].discard(name)
                if not self.clusters[c]:
                    del self.clusters[c]
            return 1
        if MASTER_ID not in group.members and group.acting:
            for topic in self.topics_of(name):
                self.queues[topic][name].perm &= ~PERM_WRITE
        return 0

    def unregister(self, cluster: str, addr: str, name: str,
                   closed_connection: str | None = None) -> int:
        """With ``closed_connection``: the broker forgets it, and goes only when no other
        connection it registered over is open (every worker is alive here); -1 when kept."""
        if closed_connection is not None:
            conns = self.conns.get((cluster, addr), set())
            if closed_connection not in conns:
                return -1
            conns.discard(closed_connection)
            if conns:
                return -1
        return self.remove_broker(cluster, addr, name)

    # --- liveness (RouteInfoManager.scanNotActiveBroker, onChannelDestroy) ---------------------

    def heartbeat(self, cluster: str, addr: str) -> bool:
        return (cluster, addr) in self.live

    def query_data_version(self, cluster: str, addr: str,
                           dv: DataVersion) -> tuple[bool, DataVersion | None]:
        live = self.live.get((cluster, addr))
        stored = live.data_version if live else None
        return stored is None or stored != dv, stored

    def sweep(self, horizon: int, guard_share: float) -> SweepResult:
        """Sweep as of now + horizon: brokers whose timeout is below the horizon are due."""
        live = len(self.live)
        due = sorted(k for k, v in self.live.items() if v.timeout < horizon)
        if not due:
            return SweepResult(False, 0, live, [])
        if guard_share > 0 and live > 4 and len(due) > live * guard_share:
            return SweepResult(True, len(due), live, [])
        removed = []
        for cluster, addr in due:
            name = self.live[(cluster, addr)].name
            self.remove_broker(cluster, addr, name)
            removed.append((cluster, addr, name))
        return SweepResult(False, len(due), live, removed)

    # --- topics and perms (RouteInfoManager.deleteTopic, registerTopic, write perms) -----------

    def delete_topic(self, topic: str, cluster: str | None = None) -> int:
        names = list(self.queues.get(topic, {}))
        if cluster:
            names = [n for n in names if n in self.clusters.get(cluster, set())]
        for name in names:
            self.drop_queue(topic, name)
        return len(names)

    def register_topic(self, topic: str, queue_datas: list[QueueData]) -> int:
        if not queue_datas:
            return 0
        if topic not in self.queues and any(q.broker_name not in self.groups for q in queue_datas):
            return 0
        written = 0
        for q in queue_datas:
            if q.broker_name not in self.groups:
                break
            self.queues.setdefault(topic, {})[q.broker_name] = structs.replace(q)
            written += 1
        return written

    def write_perm(self, name: str, op: str) -> int:
        count = 0
        for topic in self.topics_of(name):
            q = self.queues[topic][name]
            q.perm = q.perm & ~PERM_WRITE if op == "wipe" else PERM_READ | PERM_WRITE
            count += 1
        return count

    # --- reads ---------------------------------------------------------------------------------

    def route(self, topic: str) -> TopicRouteData | None:
        queues = self.queues.get(topic)
        if not queues:
            return None
        out = TopicRouteData()
        for name in sorted(queues):
            group = self.groups.get(name)
            if group is None:
                continue
            addrs = {i: a for i, a in group.members.items() if (group.cluster, a) in self.live}
            if not addrs:
                continue
            q = queues[name]
            perm = q.perm
            if MASTER_ID not in addrs and group.acting:
                perm &= ~PERM_WRITE
            out.queue_datas.append(structs.replace(q, perm=perm))
            out.broker_datas.append(BrokerData(group.cluster, name, addrs, group.acting,
                                               group.zone or None))
            for a in addrs.values():
                if self.filters.get((group.cluster, a)):
                    out.filter_server_table[a] = list(self.filters[(group.cluster, a)])
        return out if out.queue_datas else None

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            {n: BrokerData(g.cluster, n, dict(g.members), g.acting, g.zone or None)
             for n, g in self.groups.items()},
            {c: sorted(names) for c, names in self.clusters.items()})

    def all_topics(self) -> list[str]:
        return sorted(self.queues)
