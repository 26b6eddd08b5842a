"""The data source given the URL of a Redis Cluster node that does NOT hold the namespace: it must
find the primary serving the namespace's slot (every key shares the ``{<ns>}`` hash tag) and read
there - scanning the node it was given would silently return nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis
from pyspark.sql import SparkSession
from redis.crc import key_slot

from nsfleet.analytics import job, scan
from nsfleet.analytics.datasource import read_table
from nsfleet.domain.model import BrokerRegistration, TopicConfig
from nsfleet.redis_server import RedisServer
from nsfleet.store import RouteStore
from nsfleet.store.keys import Keys
from tests.spark import fleet
from tests.support.cluster_ports import cluster_port

pytestmark = [pytest.mark.spark, pytest.mark.redis]

NAMESPACE = "clustered"
RANGES = ((0, 5460), (5461, 10922), (10923, 16383))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RedisServer]]:
    """Three primaries, no replicas, started and joined here (a few seconds of gossip)."""
    taken: set[int] = set()
    nodes = [RedisServer(Path(tmp_path_factory.mktemp(f"cluster{i}")), port=cluster_port(taken),
                         appendonly=False,
                         extra_args=["--cluster-enabled", "yes", "--cluster-config-file",
                                     "nodes.conf", "--cluster-node-timeout", "2000"])
             for i in range(3)]
    try:
        for node in nodes:
            node.start()
        clients = [redis.Redis.from_url(n.url, decode_responses=True) for n in nodes]
        for client, (lo, hi) in zip(clients, RANGES, strict=True):
            client.execute_command("CLUSTER ADDSLOTS", *range(lo, hi + 1))
        for node in nodes[1:]:
            clients[0].execute_command("CLUSTER MEET", node.host, node.port)
        deadline = time.monotonic() + 30
        while not all(c.cluster("INFO")["cluster_state"] == "ok"
                      and c.cluster("INFO")["cluster_known_nodes"] == "3" for c in clients):
            if time.monotonic() > deadline:
                pytest.fail("the test Redis Cluster did not converge in 30 s")
            time.sleep(0.1)
        for c in clients:
            c.close()
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def owner_index(nodes: list[RedisServer]) -> int:
    slot = key_slot(Keys(NAMESPACE).prefix.encode())
    return next(i for i, (lo, hi) in enumerate(RANGES) if lo <= slot <= hi)


async def _populate(url: str) -> None:
    # A plain client on the owning primary: every key of the namespace is in its slot.
    client = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        store = RouteStore(client, NAMESPACE)
        for i in range(40):
            await store.register_broker(BrokerRegistration(
                f"c{i % 2}", f"10.2.0.{i}:10911", f"g-{i // 2}", i % 2,
                heartbeat_timeout_millis=600_000,
                topic_configs=[TopicConfig(f"t-{i % 7}"), TopicConfig(f"t-{i % 5}-x")]))
    finally:
        await client.aclose()


def test_reads_the_namespace_from_its_slot_owner(spark: SparkSession,
                                                 cluster: list[RedisServer]) -> None:
    own = owner_index(cluster)
    other = cluster[(own + 1) % 3]
    asyncio.run(_populate(cluster[own].url))
    client = redis.Redis.from_url(other.url, decode_responses=True)
    try:
        assert scan.slot_owner(client, Keys(NAMESPACE).prefix) == (
            cluster[own].host, cluster[own].port)
        assert not list(client.scan_iter(match=f"nsfleet:{{{NAMESPACE}}}:*"))  # not here
    finally:
        client.close()
    # (The queue data of a new store is layout 2's topic hashes, not a row table: the job's
    # reading of it, from the slot owner too, is tests/spark/test_queue_layouts.py's.)
    for table, rows in (("brokers", 40), ("groups", 20)):
        truth = fleet.typed_rows(cluster[own].url, NAMESPACE, table)
        assert len(truth) >= rows
        df = read_table(spark, table, url=other.url, namespace=NAMESPACE, partitions=3)
        assert sorted((tuple(r) for r in df.collect()), key=repr) == truth


def test_reads_layout_2_from_the_slot_owner(spark: SparkSession,
                                            cluster: list[RedisServer]) -> None:
    """The layout key, the draining groups and the topic hashes all come from the namespace's
    node, whichever node the URL names."""
    ns = "clustered-topics"
    slot = key_slot(Keys(ns).prefix.encode())
    own = next(i for i, (lo, hi) in enumerate(RANGES) if lo <= slot <= hi)
    spec = fleet.write_raw(cluster[own].url, ns, "2", int(time.time() * 1000))
    other = cluster[(own + 1) % 3].url
    t = job.load_tables(spark, other, ns, partitions=3)
    assert t.layout == job.TOPICS
    assert sorted((tuple(r) for r in t.queues.collect()), key=repr) == fleet.raw_queue_rows(spec)
    t.unpersist()


def test_standalone_server_has_no_slot_owner(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        assert scan.slot_owner(client, Keys(NAMESPACE).prefix) is None
    finally:
        client.close()
