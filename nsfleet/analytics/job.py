"""The fleet report's computations: pure functions from the table DataFrames to result DataFrames.

Inputs are the ``nsfleet`` data source's DataFrames (default schemas). Past the loading (the data
source, and the queue data's layout key) nothing here touches Redis or the file system, so each
function can be tested on hand-made DataFrames. Joins are on ``brokerName`` alone: a broker group
name is global in RocketMQ (the group row is keyed by it).

``queues`` is the same table in both queue-data layouts (docs/queue-data-layouts.md): layout 1's
row hashes as they are, or layout 2's topic hashes read with a column per brokerName and stacked
into the same (topic, brokerName) rows (``queues_from_topics``).

"Live" means "has a broker row": rows carry the broker's deadline as their TTL, so an expired
broker is gone from the brokers table even before the sweep cascades it out of the indexes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from nsfleet.analytics import scan, tables
from nsfleet.analytics.datasource import read_table, schema, topics_schema
from nsfleet.domain.model import MASTER_ID, PERM_WRITE
from nsfleet.store.keys import Keys

NO_ZONE = "(none)"
"""Zone label of brokers registered without one (a real zone cannot contain parentheses)."""

NEAR_DEADLINE = (0.10, 0.25, 0.50)
"""Headroom thresholds reported: share of the heartbeat timeout left before the deadline."""

ROWS, TOPICS = "1", "2"
"""The queue data's layouts as the job reads them: layout 1's row hashes (also while the store
is "moving", whose readers read layout 1's keys) or layout 2's topic hashes."""

_TOPIC_KEY = ":topic"  # the topic hashes' key column: a brokerName may be "topic", none has ':'


@dataclass(slots=True)
class FleetTables:
    brokers: DataFrame
    groups: DataFrame
    queues: DataFrame
    kv: DataFrame
    broker_sets: DataFrame  # the controller's (docs/controller.md)
    replicas: DataFrame
    layout: str = ROWS  # the layout ``queues`` was read in

    def all(self) -> tuple[DataFrame, ...]:
        return (self.brokers, self.groups, self.queues, self.kv, self.broker_sets, self.replicas)

    def cache(self) -> FleetTables:
        """Pin one snapshot: without it every action would rescan Redis, and two results of the
        same report could disagree about a broker that expired in between."""
        for df in self.all():
            df.cache()
        return self

    def unpersist(self) -> None:
        for df in self.all():
            df.unpersist()


def read_layout(url: str, namespace: str) -> str:
    """``ROWS`` or ``TOPICS``, from the store's ``P:layout``."""
    key = Keys(namespace).layout
    client = scan.namespace_client(url, key)
    try:
        layout = client.get(key)
    finally:
        client.close()
    if layout in (None, "1", "moving"):
        return ROWS
    if layout == "2":
        return TOPICS
    raise ValueError(f"{key} is {layout!r}: a queue data layout this build cannot read")


def draining_groups(url: str, namespace: str) -> set[str]:
    """brokerNames of removed groups whose queue data is still being deleted: rows without a
    group row, which the report shows as ``queue_without_group`` in both layouts."""
    key = Keys(namespace).cleanups
    client = scan.namespace_client(url, key)
    try:
        return set(client.smembers(key))
    finally:
        client.close()


def queues_from_topics(topics: DataFrame, broker_names: Sequence[str],
                       key_column: str = tables.TOPICS_KEY_COLUMN) -> DataFrame:
    """Layout 2's topic hashes (a row per topic: its key column, then a string column per
    brokerName holding its queue data, ``tables.QUEUE_VALUE`` tab-separated, or null) as the
    ``queues`` table: a row per value, with layout 1's columns, types and ``_key``."""
    if not broker_names:
        return topics.sparkSession.createDataFrame([], schema("queues"))
    # stack(n, name1, value1, ...): a (brokerName, value) row per column; faster than unpivot
    # (an Expand of a projection per column) over hundreds of brokerNames.
    pairs = [c for name in broker_names for c in (F.lit(name), F.col(tables.quote(name)))]
    stacked = (topics.select(F.col(tables.quote(key_column)).alias("topic"),
                             F.stack(F.lit(len(broker_names)), *pairs).alias("brokerName", "value"))
               .where(F.col("value").isNotNull()))
    # ANSI casts (Spark 4's default) fail on a malformed number, as the row reader does.
    parts = F.split("value", "\t")
    return stacked.select(
        "topic", "brokerName",
        *(parts[i].cast("int").alias(c) for i, c in enumerate(tables.QUEUE_VALUE)),
        F.concat("topic", F.lit(":"), "brokerName").alias(tables.KEY_COLUMN))


def topic_queues(spark: SparkSession, groups: DataFrame, url: str, namespace: str,
                 partitions: int = 4, scan_count: int = 1000) -> DataFrame:
    """Layout 2's ``queues``: the topic hashes read with a column per brokerName of ``groups``
    and of the removed groups still draining (a hash field of no such name is not read)."""
    found = {r.brokerName for r in groups.select("brokerName").collect() if r.brokerName}
    names = sorted(found | draining_groups(url, namespace))
    if not names:
        return spark.createDataFrame([], schema("queues"))
    topics = read_table(spark, tables.TOPICS, url=url, namespace=namespace,
                        partitions=partitions, scan_count=scan_count,
                        schema=topics_schema(names, _TOPIC_KEY), key_column=_TOPIC_KEY)
    return queues_from_topics(topics, names, _TOPIC_KEY)


def load_tables(spark: SparkSession, url: str, namespace: str, partitions: int = 4,
                scan_count: int = 1000) -> FleetTables:
    def read(table: str) -> DataFrame:
        return read_table(spark, table, url=url, namespace=namespace, partitions=partitions,
                          scan_count=scan_count)

    # Cached now: layout 2's queues are read with its brokerNames, from the same snapshot.
    groups = read("groups").cache()
    layout = read_layout(url, namespace)
    queues = (read("queues") if layout == ROWS
              else topic_queues(spark, groups, url, namespace, partitions, scan_count))
    return FleetTables(read("brokers"), groups, queues, read("kv"), read("broker_sets"),
                       read("replicas"), layout)


def settle_layout(spark: SparkSession, t: FleetTables, url: str, namespace: str,
                  partitions: int = 4, scan_count: int = 1000) -> bool:
    """After ``t`` is read: when the store finished moving to layout 2 meanwhile, layout 1's
    rows may have been deleted under the read, so ``queues`` is read again from the topic hashes
    (cached, as ``t``'s tables are). True when it was."""
    if t.layout == TOPICS or read_layout(url, namespace) == ROWS:
        return False
    t.queues.unpersist()
    t.queues = topic_queues(spark, t.groups, url, namespace, partitions, scan_count).cache()
    t.layout = TOPICS
    return True


def _zone(col: str = "zoneName") -> Column:
    return F.when(F.col(col).isNull() | (F.col(col) == ""), F.lit(NO_ZONE)).otherwise(F.col(col))


def _is_master() -> Column:
    return F.col("brokerId") == MASTER_ID


def _writable() -> Column:
    return F.col("perm").bitwiseAND(PERM_WRITE) != 0


def brokers_by_cluster_zone(brokers: DataFrame) -> DataFrame:
    """Live brokers per (cluster, zone): brokers, groups, masters, slaves."""
    return (brokers.withColumn("zone", _zone())
            .groupBy("cluster", "zone")
            .agg(F.count("*").alias("brokers"),
                 F.countDistinct("brokerName").alias("groups"),
                 F.sum(_is_master().cast("long")).alias("masters"),
                 F.sum((~_is_master()).cast("long")).alias("slaves"))
            .orderBy("cluster", "zone"))


def _live_members(brokers: DataFrame) -> DataFrame:
    return (brokers.groupBy("brokerName")
            .agg(F.count("*").alias("liveMembers"),
                 F.array_sort(F.collect_set("brokerId")).alias("liveBrokerIds"),
                 F.max(_is_master()).alias("hasLiveMaster")))


def group_topics(groups: DataFrame, queues: DataFrame, brokers: DataFrame) -> DataFrame:
    """Per broker group: topics, read/write queue totals, writable topics and live members."""
    per_group = (queues.groupBy("brokerName")
                 .agg(F.countDistinct("topic").alias("topics"),
                      F.sum("readQueueNums").cast("long").alias("readQueues"),
                      F.sum("writeQueueNums").cast("long").alias("writeQueues"),
                      F.sum(_writable().cast("long")).alias("writableTopics")))
    return (groups.select("brokerName", "cluster", _zone().alias("zone"), "enableActingMaster")
            .join(per_group, "brokerName", "left")
            .join(_live_members(brokers).drop("liveBrokerIds"), "brokerName", "left")
            .fillna(0, ["topics", "readQueues", "writeQueues", "writableTopics", "liveMembers"])
            .fillna(False, ["hasLiveMaster"])
            .orderBy("cluster", "brokerName"))


def queue_skew(queues: DataFrame) -> DataFrame:
    """Per topic: write queues across its groups; ``skew`` = largest / mean (1.0 = even, null
    when the topic has no write queue at all). Most skewed first."""
    wq = F.col("writeQueueNums")
    return (queues.groupBy("topic")
            .agg(F.count("*").alias("groups"),
                 F.sum(wq).cast("long").alias("totalWriteQueues"),
                 F.min(wq).alias("minWriteQueues"),
                 F.max(wq).alias("maxWriteQueues"),
                 F.avg(wq).alias("meanWriteQueues"))
            .withColumn("skew", F.when(F.col("meanWriteQueues") > 0,
                                       F.col("maxWriteQueues") / F.col("meanWriteQueues")))
            .orderBy(F.desc_nulls_last("skew"), F.desc("groups"), "topic"))


def groups_without_master(groups: DataFrame, brokers: DataFrame) -> DataFrame:
    """Groups with no live broker of id 0 (including groups with no live member at all)."""
    masters = brokers.where(_is_master()).select("brokerName").distinct()
    return (groups.join(masters, "brokerName", "left_anti")
            .join(_live_members(brokers).drop("hasLiveMaster"), "brokerName", "left")
            .select("brokerName", "cluster", _zone().alias("zone"), "enableActingMaster",
                    F.coalesce(F.col("liveMembers"), F.lit(0)).alias("liveMembers"),
                    "liveBrokerIds")
            .orderBy("cluster", "brokerName"))


def controller_broker_sets(broker_sets: DataFrame, replicas: DataFrame,
                           brokers: DataFrame) -> DataFrame:
    """The controller's broker sets: master, epochs, in-sync replicas, how many replicas, and
    whether the master is the route's brokerId 0 (a live master row at its address)."""
    counts = replicas.groupBy("brokerName").agg(F.count("*").alias("replicas"))
    routed = (brokers.where(_is_master())
              .select("brokerName", F.col("brokerAddr").alias("masterAddress"),
                      F.lit(True).alias("masterRouted")))
    return (broker_sets.join(counts, "brokerName", "left")
            .join(routed, ["brokerName", "masterAddress"], "left")
            .select("brokerName", "clusterName", "masterBrokerId", "masterAddress",
                    "masterEpoch", "syncStateSet", "syncStateSetEpoch",
                    F.coalesce(F.col("replicas"), F.lit(0)).alias("replicas"),
                    F.coalesce(F.col("masterRouted"), F.lit(False)).alias("masterRouted"))
            .orderBy("brokerName"))


def read_only_topics(queues: DataFrame) -> DataFrame:
    """Topics none of whose queue data has PERM_WRITE: producers cannot send to them."""
    return (queues.groupBy("topic")
            .agg(F.count("*").alias("groups"),
                 F.max(_writable().cast("int")).alias("_anyWritable"),
                 F.array_sort(F.collect_set("perm")).alias("perms"),
                 F.sum("readQueueNums").cast("long").alias("readQueues"))
            .where(F.col("_anyWritable") == 0)
            .drop("_anyWritable")
            .orderBy("topic"))


def heartbeats(brokers: DataFrame, now_ms: int) -> DataFrame:
    """Per live broker at ``now_ms`` (Redis server time, the clock deadlines are set by): age of
    the last heartbeat, the deadline, time left and ``headroom`` = time left / timeout."""
    now = F.lit(now_ms).cast("long")
    deadline = F.col("lastUpdateTimestamp") + F.col("heartbeatTimeoutMillis")
    return (brokers.select(
        "cluster", "brokerName", "brokerAddr", "brokerId", _zone().alias("zone"),
        "lastUpdateTimestamp", "heartbeatTimeoutMillis",
        (now - F.col("lastUpdateTimestamp")).alias("ageMs"),
        deadline.alias("deadline"),
        (deadline - now).alias("remainingMs"),
        ((deadline - now) / F.col("heartbeatTimeoutMillis")).alias("headroom"))
        .orderBy("remainingMs", "cluster", "brokerAddr"))


def inconsistencies(groups: DataFrame, queues: DataFrame, brokers: DataFrame) -> DataFrame:
    """Rows that contradict each other. ``kind`` is one of

    * ``queue_without_group``: queue data whose brokerName has no group row;
    * ``group_without_live_member``: a group row none of whose brokers has a live row (normal
      for up to one sweep interval after the last member expired; longer means no sweep runs);
    * ``broker_without_group``: a live broker row whose group row is missing.
    """
    names = groups.select("brokerName")
    null = F.lit(None).cast("string")
    orphan_queues = (queues.join(names, "brokerName", "left_anti").select(
        F.lit("queue_without_group").alias("kind"), null.alias("cluster"), "brokerName",
        "topic", null.alias("brokerAddr")))
    dead_groups = (groups.join(brokers.select("brokerName").distinct(), "brokerName", "left_anti")
                   .select(F.lit("group_without_live_member").alias("kind"), "cluster",
                           "brokerName", null.alias("topic"), null.alias("brokerAddr")))
    orphan_brokers = (brokers.join(names, "brokerName", "left_anti").select(
        F.lit("broker_without_group").alias("kind"), "cluster", "brokerName",
        null.alias("topic"), "brokerAddr"))
    return (orphan_queues.unionByName(dead_groups).unionByName(orphan_brokers)
            .orderBy("kind", "brokerName", "topic", "brokerAddr"))


@dataclass(slots=True)
class Analysis:
    """Every result table of the report, lazily (nothing runs until collected)."""

    brokers_by_cluster_zone: DataFrame
    group_topics: DataFrame
    queue_skew: DataFrame
    groups_without_master: DataFrame
    read_only_topics: DataFrame
    heartbeats: DataFrame
    inconsistencies: DataFrame
    controller_broker_sets: DataFrame

    def items(self) -> list[tuple[str, DataFrame]]:
        return [(f.name, getattr(self, f.name)) for f in fields(self)]


def analyze(t: FleetTables, now_ms: int) -> Analysis:
    return Analysis(
        brokers_by_cluster_zone=brokers_by_cluster_zone(t.brokers),
        group_topics=group_topics(t.groups, t.queues, t.brokers),
        queue_skew=queue_skew(t.queues),
        groups_without_master=groups_without_master(t.groups, t.brokers),
        read_only_topics=read_only_topics(t.queues),
        heartbeats=heartbeats(t.brokers, now_ms),
        inconsistencies=inconsistencies(t.groups, t.queues, t.brokers),
        controller_broker_sets=controller_broker_sets(t.broker_sets, t.replicas, t.brokers),
    )


def totals(t: FleetTables) -> dict[str, Any]:
    """Fleet-wide counts, one small aggregation per table."""
    b = t.brokers.agg(
        F.count("*").alias("brokers"),
        F.coalesce(F.sum(_is_master().cast("long")), F.lit(0)).alias("masters"),
        F.countDistinct(F.when(F.col("zoneName") != "", F.col("zoneName"))).alias("zones"),
    ).first()
    g = t.groups.agg(F.count("*").alias("groups"),
                     F.countDistinct("cluster").alias("clusters")).first()
    q = t.queues.agg(
        F.count("*").alias("queueRows"), F.countDistinct("topic").alias("topics"),
        F.coalesce(F.sum("readQueueNums"), F.lit(0)).cast("long").alias("readQueues"),
        F.coalesce(F.sum("writeQueueNums"), F.lit(0)).cast("long").alias("writeQueues"),
    ).first()
    kv = t.kv.agg(F.count("*").alias("kvEntries"),
                  F.countDistinct("namespace").alias("kvNamespaces")).first()
    assert b is not None and g is not None and q is not None and kv is not None
    out: dict[str, Any] = {**b.asDict(), **g.asDict(), **q.asDict(), **kv.asDict()}
    out["slaves"] = out["brokers"] - out["masters"]
    return {k: int(v) for k, v in out.items()}
