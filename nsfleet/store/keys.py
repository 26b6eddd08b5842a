"""The Redis key schema: the only place in Python where key strings are formed.

Every key of one namespace (one RocketMQ deployment) starts with ``nsfleet:{<ns>}`` so that all of
them share one Redis Cluster hash slot and every Lua script may touch any of them. ``lua/includes/
keys.lua`` builds the same keys inside scripts from the prefix passed as KEYS[1]; a test checks
the two agree.

Row tables (one flat hash per row, identifying fields stored inside the row too; spark-redis reads
them with ``keys.pattern`` + ``key.column``)::

  P:broker:<cluster>:<addr>      hash, PEXPIREAT = deadline   brokerLiveTable
  P:group:<brokerName>           hash                         brokerAddrTable (group meta)
  P:kv:<namespace>:<key>         hash                         KV config (':' and '%' escaped)

The queue data (topicQueueTable), in the layout ``P:layout`` names (docs/queue-data-layouts.md)::

  P:layout                       string "2" (layout 2); absent or "1": layout 1; "moving"
  P:layout-move                  hash   the move from layout 1 to 2 under way (store/layout_move.py)
  layout 2, Java's shape, one hash per topic:
  P:topic:<topic>                hash   brokerName -> "rq\\twq\\tperm\\tflag" (spark-redis reads it
                                        with a column per brokerName, docs/spark.md)
  P:idx:group-topics:<name>      hash   the topics a group serves, as lists: "<n>" (or the
                                        move's "m<n>") -> topics joined by "\\n"; "#" the last n
  P:idx:cleanup-topics:<name>    hash   a removed group's lists still to delete
  layout 1, stores written before 2026-11-28 until they move:
  P:queue:<topic>:<brokerName>   hash   one row (a row table: topic, brokerName, the four numbers)
  P:idx:topic:<topic>            set    the groups serving the topic, by number (an intset)
  P:idx:group-ids                hash   brokerName -> its group number ("-1", "-2", ...)
  P:idx:group-names              hash   group number -> brokerName
  P:idx:group-seq                string the last group number given (negated)
  P:idx:broker-topics:<name>     set    topics of a broker group (cascade is O(its topics))
  P:idx:cleanup:<name>           set    the topics of a removed group still to remove

Indexes (never under a row-table prefix)::

  P:idx:clusters                 set    cluster names
  P:idx:cluster:<cluster>        set    brokerNames of a cluster (clusterAddrTable)
  P:idx:members:<brokerName>     hash   brokerId -> brokerAddr (BrokerData.brokerAddrs)
  P:idx:topics                   set    all topics
  P:idx:deadlines                zset   "<cluster>\\t<addr>" by deadline (epoch ms)
  P:idx:reg:<cluster>:<addr>     hash   brokerName, brokerId, generation; outlives the row's
                                        TTL, so the sweep can cascade and fence after expiry;
                                        "pending" while a chunked registration has not committed
  P:idx:tables:<cluster>:<addr>  set    digests of the topic tables (whole, or chunks of a split
                                        registration) this broker's registrations wrote as they
                                        say; valid while the record's topicsEpoch is the group's
  P:idx:filters:<cluster>:<addr> list   filter server addresses
  P:idx:member-clusters:<name>   hash   brokerAddr -> the cluster it registered under (a group's
                                        members may register under different cluster names)
  P:idx:route-groups             hash   brokerName -> what a route shows of the group, derived
                                        from its row, members and their clusters (one HMGET
                                        for every group of a route: lua/includes/group_routes.lua)
  P:idx:filtered                 set    "<cluster>\\t<addr>" of the brokers with filter servers
                                        (a route reads the lists only while one exists)
  P:idx:conns:<cluster>:<addr>   set    "<worker>:<n>": the remoting connections over which the
                                        broker registered (removed when the last one closes)
  P:idx:worker:<worker>          string a worker's presence (PX), so a dead worker's
                                        connections count as closed: "2" (a build that knows
                                        the queue data's layout 2) or "1" (one before)
  P:idx:worker-addrs             hash   worker -> the remoting address it advertises (the
                                        address server lists those whose presence is alive)
  P:idx:mappings:<topic>         hash   brokerName -> TopicQueueMappingInfo JSON (static topics)
  P:idx:kvns                     set    KV namespaces (an emptied one still exists, as in Java)
  P:idx:kv:<namespace>           hash   key -> value of one KV namespace (one-read KVTable)
  P:idx:cleanups                 set    brokerNames of removed groups whose queue data is
                                        still being removed in chunks (drain_cleanup.lua)
  P:idx:perm-clears              hash   brokerName -> SSCAN cursor: acting-master groups whose
                                        write perm is still being cleared in chunks
  P:seq                          string registration generation counter (fencing)
  P:rev                          string change counter (long-poll, a worker's view marker)
  P:changes                      pub/sub channel "<rev> <topic,topic|*>" after every change,
                                        plus "0 @config", "0 @expired:..." and
                                        "0 @sync:<worker>:<n>" (format: change_feed.py)
  P:config                       hash   NameServer settings changed at run time (code 318)
  P:nsaddr:extra                 set    fixed addresses the address server lists besides the
                                        live workers (e.g. the Java NameServers of a migration)
  P:history                      stream the fleet's recent changes, capped (XADD MAXLEN ~;
                                        format: history.py)

The controller's tables (RocketMQ 5's controller mode, docs/controller.md), changed only by the
``lua/controller_*.lua`` scripts; the two row tables are what the analytics job reads::

  P:ctl:set:<brokerName>         hash   a broker set (SyncStateInfo + BrokerReplicaInfo's
                                        head): brokerName, clusterName, nextBrokerId,
                                        masterBrokerId ("" = none), masterAddress, masterEpoch,
                                        syncStateSet ("1;2", ids ascending), syncStateSetEpoch
  P:ctl:replica:<brokerName>:<id> hash  one replica: brokerName, brokerId, brokerAddress,
                                        registerCheckCode
  P:ctl:live:<brokerName>:<id>   hash   its last controller heartbeat (904): clusterName,
                                        brokerName, brokerId, brokerAddr, epoch, maxOffset,
                                        confirmOffset, electionPriority, heartbeatTimeoutMills,
                                        lastUpdateTimestamp, connection ("<worker>:<n>")
  P:ctl:conns:<brokerName>:<id>  hash   "<worker>:<n>" -> the last heartbeat over it (epoch ms):
                                        every connection the replica heartbeats over (a broker
                                        heartbeats every controller address it has)
  P:ctl:config                   hash   the controller's settings changed at run time
                                        (UPDATE_CONTROLLER_CONFIG): enableElectUncleanMaster,
                                        notifyBrokerRoleChanged
  P:ctl:idx:sets                 set    broker set names
  P:ctl:idx:ids:<brokerName>     set    the set's replica ids
  P:ctl:idx:deadlines            zset   "<brokerName>\t<id>" of the live replicas, by deadline
                                        (epoch ms): alive while it is in the future
"""

from __future__ import annotations

from dataclasses import dataclass

from nsfleet.domain.model import ORDER_TOPIC_CONFIG

__all__ = ["GROUP_TOPICS_COUNTER", "ORDER_TOPIC_CONFIG", "ROUTE_GROUPS_HASHTABLE", "TABLE_PREFIX",
           "Keys", "escape", "live_member", "unescape"]


def escape(part: str) -> str:
    """Escape a free-form key component (KV namespace or key) so ':' stays a separator."""
    return part.replace("%", "%25").replace(":", "%3A")


def unescape(part: str) -> str:
    return part.replace("%3A", ":").replace("%25", "%")


@dataclass(frozen=True, slots=True)
class Keys:
    """Key builder for one nsfleet namespace."""

    namespace: str

    @property
    def prefix(self) -> str:
        return f"nsfleet:{{{self.namespace}}}"

    # Row tables.
    def broker(self, cluster: str, addr: str) -> str:
        return f"{self.prefix}:broker:{cluster}:{addr}"

    def group(self, broker_name: str) -> str:
        return f"{self.prefix}:group:{broker_name}"

    def queue(self, topic: str, broker_name: str) -> str:
        return f"{self.prefix}:queue:{topic}:{broker_name}"

    def kv(self, namespace: str, key: str) -> str:
        return f"{self.prefix}:kv:{escape(namespace)}:{escape(key)}"

    def table_pattern(self, table: str) -> str:
        """SCAN MATCH pattern of a row table (``brokers``, ``groups``, ``queues``, ``kv``)."""
        return f"{self.prefix}:{TABLE_PREFIX[table]}:*"

    # Indexes.
    @property
    def clusters(self) -> str:
        return f"{self.prefix}:idx:clusters"

    def cluster(self, cluster: str) -> str:
        return f"{self.prefix}:idx:cluster:{cluster}"

    def members(self, broker_name: str) -> str:
        return f"{self.prefix}:idx:members:{broker_name}"

    @property
    def topics(self) -> str:
        return f"{self.prefix}:idx:topics"

    def topic(self, topic: str) -> str:
        return f"{self.prefix}:idx:topic:{topic}"

    @property
    def group_ids(self) -> str:
        return f"{self.prefix}:idx:group-ids"

    @property
    def group_names(self) -> str:
        return f"{self.prefix}:idx:group-names"

    @property
    def group_seq(self) -> str:
        return f"{self.prefix}:idx:group-seq"

    def broker_topics(self, broker_name: str) -> str:
        return f"{self.prefix}:idx:broker-topics:{broker_name}"

    @property
    def deadlines(self) -> str:
        return f"{self.prefix}:idx:deadlines"

    def reg(self, cluster: str, addr: str) -> str:
        return f"{self.prefix}:idx:reg:{cluster}:{addr}"

    def tables(self, cluster: str, addr: str) -> str:
        return f"{self.prefix}:idx:tables:{cluster}:{addr}"

    def filters(self, cluster: str, addr: str) -> str:
        return f"{self.prefix}:idx:filters:{cluster}:{addr}"

    def member_clusters(self, broker_name: str) -> str:
        return f"{self.prefix}:idx:member-clusters:{broker_name}"

    @property
    def route_groups(self) -> str:
        return f"{self.prefix}:idx:route-groups"

    @property
    def filtered(self) -> str:
        return f"{self.prefix}:idx:filtered"

    def conns(self, cluster: str, addr: str) -> str:
        return f"{self.prefix}:idx:conns:{cluster}:{addr}"

    def worker(self, worker: str) -> str:
        return f"{self.prefix}:idx:worker:{worker}"

    @property
    def worker_addrs(self) -> str:
        return f"{self.prefix}:idx:worker-addrs"

    def mappings(self, topic: str) -> str:
        return f"{self.prefix}:idx:mappings:{topic}"

    @property
    def kv_namespaces(self) -> str:
        return f"{self.prefix}:idx:kvns"

    def kv_table(self, namespace: str) -> str:
        return f"{self.prefix}:idx:kv:{escape(namespace)}"

    @property
    def cleanups(self) -> str:
        return f"{self.prefix}:idx:cleanups"

    def cleanup(self, broker_name: str) -> str:
        return f"{self.prefix}:idx:cleanup:{broker_name}"

    @property
    def perm_clears(self) -> str:
        return f"{self.prefix}:idx:perm-clears"

    # The queue data's layout (docs/table-shape.md): "2" one hash per topic, else one per row.
    @property
    def layout(self) -> str:
        return f"{self.prefix}:layout"

    @property
    def layout_move(self) -> str:
        return f"{self.prefix}:layout-move"

    def topic_routes(self, topic: str) -> str:
        return f"{self.prefix}:topic:{topic}"

    def group_topics(self, broker_name: str) -> str:
        return f"{self.prefix}:idx:group-topics:{broker_name}"

    def cleanup_topics(self, broker_name: str) -> str:
        return f"{self.prefix}:idx:cleanup-topics:{broker_name}"

    @property
    def seq(self) -> str:
        return f"{self.prefix}:seq"

    @property
    def rev(self) -> str:
        return f"{self.prefix}:rev"

    @property
    def changes(self) -> str:
        return f"{self.prefix}:changes"

    @property
    def config(self) -> str:
        return f"{self.prefix}:config"

    @property
    def extra_nsaddrs(self) -> str:
        return f"{self.prefix}:nsaddr:extra"

    @property
    def history(self) -> str:
        return f"{self.prefix}:history"

    # The controller's tables.
    def ctl_set(self, broker_name: str) -> str:
        return f"{self.prefix}:ctl:set:{broker_name}"

    def ctl_replica(self, broker_name: str, broker_id: int) -> str:
        return f"{self.prefix}:ctl:replica:{broker_name}:{broker_id}"

    def ctl_live(self, broker_name: str, broker_id: int) -> str:
        return f"{self.prefix}:ctl:live:{broker_name}:{broker_id}"

    def ctl_conns(self, broker_name: str, broker_id: int) -> str:
        return f"{self.prefix}:ctl:conns:{broker_name}:{broker_id}"

    @property
    def ctl_config(self) -> str:
        return f"{self.prefix}:ctl:config"

    @property
    def ctl_sets(self) -> str:
        return f"{self.prefix}:ctl:idx:sets"

    def ctl_ids(self, broker_name: str) -> str:
        return f"{self.prefix}:ctl:idx:ids:{broker_name}"

    @property
    def ctl_deadlines(self) -> str:
        return f"{self.prefix}:ctl:idx:deadlines"


# The field of P:idx:group-topics:<name> numbering its lists (lua/includes/topics/queue_data.lua).
GROUP_TOPICS_COUNTER = "#"
# The field of P:idx:route-groups, beside its entries, that keeps it a hash table
# (lua/includes/group_routes.lua): no brokerName holds a ':'.
ROUTE_GROUPS_HASHTABLE = ":hashtable"


def live_member(cluster: str, addr: str) -> str:
    """Member name of a broker in the deadline zset."""
    return f"{cluster}\t{addr}"


def replica_member(broker_name: str, broker_id: int) -> str:
    """Member name of a controller replica in P:ctl:idx:deadlines."""
    return f"{broker_name}\t{broker_id}"


TABLE_PREFIX = {"brokers": "broker", "groups": "group", "queues": "queue", "kv": "kv",
                "broker_sets": "ctl:set", "replicas": "ctl:replica"}
