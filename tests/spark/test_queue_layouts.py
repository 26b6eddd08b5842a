"""The analytics over both queue-data layouts (docs/queue-data-layouts.md): the same fleet written
key by key as layout 1's row hashes and as layout 2's topic hashes gives the same ``queues`` rows
and the same report; a store "moving" is read in layout 1, and one that finishes its move during
the read is read again in layout 2. Layout 2 read by hand, with the ``nsfleet`` data source and
the way spark-redis reads it (tests/spark/spark_redis.py), as docs/spark.md shows."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
import redis
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StringType, StructType

from nsfleet.analytics import cli, job, tables
from nsfleet.analytics.datasource import read_table, schema, topics_schema
from nsfleet.redis_server import RedisServer
from nsfleet.store.keys import Keys
from tests.spark import fleet, spark_redis
from tests.spark.conftest import clear_namespace
from tests.spark.test_analytics import CHART_FILES, TABLE_FILES, parse

pytestmark = [pytest.mark.spark, pytest.mark.redis]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "spark.md"
ROWS_NS, TOPICS_NS, MOVING_NS = "layout-rows", "layout-topics", "layout-moving"
# Columns of the heartbeats table that depend on when the report ran.
NOW_COLUMNS = ["ageMs", "remainingMs", "headroom"]


def rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


@pytest.fixture(scope="module")
def fleets(redis_server: RedisServer) -> Iterator[dict[str, fleet.FleetSpec]]:
    """The same fleet in layout 1 and in layout 2, with the same heartbeat times."""
    client = redis.Redis.from_url(redis_server.url)
    seconds, micros = client.time()
    client.close()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    specs = {}
    for ns, layout in ((ROWS_NS, "1"), (TOPICS_NS, "2")):
        clear_namespace(redis_server.url, ns)
        specs[layout] = fleet.write_raw(redis_server.url, ns, layout, now_ms)
    yield specs
    for ns in (ROWS_NS, TOPICS_NS):
        clear_namespace(redis_server.url, ns)


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_server.url, decode_responses=True)
    yield c
    c.close()


def test_both_layouts_give_the_same_queues(spark: SparkSession, redis_server: RedisServer,
                                           fleets: dict[str, fleet.FleetSpec]) -> None:
    want = fleet.raw_queue_rows(fleets["1"])
    assert want == fleet.raw_queue_rows(fleets["2"])
    by_layout = {}
    for ns, layout in ((ROWS_NS, job.ROWS), (TOPICS_NS, job.TOPICS)):
        t = job.load_tables(spark, redis_server.url, ns, partitions=3, scan_count=100)
        assert t.layout == layout
        assert t.queues.schema == schema("queues")
        by_layout[layout] = rows(t.queues)
        t.unpersist()
    assert by_layout[job.ROWS] == by_layout[job.TOPICS] == want
    got = {(r[0], r[1]) for r in want}
    # The rows the quoting and the draining group are there for.
    assert ("odd-topic", fleet.ODD_GROUP) in got and ("ghost-topic-0", fleet.ORPHAN_GROUP) in got


def test_both_layouts_give_the_same_report(spark: SparkSession, redis_server: RedisServer,
                                           fleets: dict[str, fleet.FleetSpec],
                                           tmp_path: Path) -> None:
    out, seconds = {}, {}
    for ns in (ROWS_NS, TOPICS_NS):
        out[ns] = tmp_path / ns
        started = time.perf_counter()
        assert cli.run(parse("--redis-url", redis_server.url, "--namespace", ns,
                             "--out", str(out[ns]), "--partitions", "2")) == 0
        seconds[ns] = time.perf_counter() - started
    print(f"report seconds: layout 1 {seconds[ROWS_NS]:.1f}, layout 2 {seconds[TOPICS_NS]:.1f}")

    rows_json, topics_json = (json.loads((out[ns] / "summary.json").read_text())
                              for ns in (ROWS_NS, TOPICS_NS))
    assert rows_json["counts"] == topics_json["counts"]
    c = rows_json["counts"]
    assert (c["queuesWithoutGroup"], c["groupsWithoutLiveMember"], c["topics"]) == (
        3, 6, 2000 + 4)  # ghost-topic-0..2 and odd-topic
    for key in ("brokersByClusterZone", "maxSkew"):
        assert rows_json[key] == topics_json[key], key
    for name in TABLE_FILES:
        frames = [pd.read_parquet(out[ns] / "tables" / f"{name}.parquet")
                  for ns in (ROWS_NS, TOPICS_NS)]
        if name == "heartbeats":
            frames = [f.drop(columns=NOW_COLUMNS) for f in frames]
        pd.testing.assert_frame_equal(*frames, obj=name)
    for name in ("brokers_by_cluster_zone", "topics_per_group", "queue_skew"):
        assert ((out[ROWS_NS] / "charts" / f"{name}.png").read_bytes()
                == (out[TOPICS_NS] / "charts" / f"{name}.png").read_bytes()), name
    assert all((out[TOPICS_NS] / "charts" / f"{n}.png").stat().st_size > 5000
               for n in CHART_FILES)
    # summary.md: the same but for the namespace and the clock (its first lines and the
    # heartbeats' section).
    texts = []
    for ns in (ROWS_NS, TOPICS_NS):
        text = (out[ns] / "summary.md").read_text()
        rest = text.split("## Totals", 1)[1]
        before, after = rest.split("## Heartbeats and deadlines", 1)
        texts.append(before + after.split("## Inconsistencies", 1)[1])
    assert texts[0] == texts[1] and "| queue data without a group | 3 |" in texts[0]


def test_a_moving_store_is_read_in_layout_1_until_it_has_moved(
        spark: SparkSession, redis_server: RedisServer, client: redis.Redis) -> None:
    keys = Keys(MOVING_NS)
    clear_namespace(redis_server.url, MOVING_NS)
    spec = fleet.write_raw(redis_server.url, MOVING_NS, "moving", int(time.time() * 1000))
    want = fleet.raw_queue_rows(spec)
    # The move under way has written part of a topic hash (with other numbers): not read yet.
    topic, name = want[0][:2]
    client.hset(keys.topic_routes(topic), name, "99\t99\t6\t0")

    t = job.load_tables(spark, redis_server.url, MOVING_NS, partitions=2).cache()
    assert [df.count() for df in (t.queues, t.groups)] == [len(want), len(spec.groups) - 1]
    assert t.layout == job.ROWS and rows(t.queues) == want
    assert not job.settle_layout(spark, t, redis_server.url, MOVING_NS, partitions=2)

    # The move ends after the rows were read: topic hashes written, "2", the rows deleted.
    fleet.write_raw(redis_server.url, MOVING_NS, "2", int(time.time() * 1000))
    client.delete(*client.scan_iter(match=tables.pattern(MOVING_NS, "queues"), count=1000))
    assert job.settle_layout(spark, t, redis_server.url, MOVING_NS, partitions=2)
    assert t.layout == job.TOPICS and rows(t.queues) == want
    assert t.queues.is_cached
    t.unpersist()
    clear_namespace(redis_server.url, MOVING_NS)


def test_an_unknown_layout_is_refused(redis_server: RedisServer, client: redis.Redis) -> None:
    keys = Keys("layout-unknown")
    try:
        assert job.read_layout(redis_server.url, "layout-unknown") == job.ROWS  # no key: 1
        client.set(keys.layout, "1")
        assert job.read_layout(redis_server.url, "layout-unknown") == job.ROWS
        client.set(keys.layout, "3")
        with pytest.raises(ValueError, match="layout this build cannot read"):
            job.read_layout(redis_server.url, "layout-unknown")
    finally:
        client.delete(keys.layout)


def test_queues_from_topics_on_small_frames(spark: SparkSession) -> None:
    names = ["a.b", "c`d", "topic", "absent"]
    topics = spark.createDataFrame([
        ("t1", "1\t2\t6\t0", None, "3\t4\t2\t1", None),
        ("t2", None, "8\t8\t4\t0", None, None),
        ("t3", None, None, None, None),  # a hash none of whose fields the schema names
    ], topics_schema(names, ":topic"))
    got = job.queues_from_topics(topics, names, ":topic")
    assert got.schema == schema("queues")
    assert rows(got) == [("t1", "a.b", 1, 2, 6, 0, "t1:a.b"),
                         ("t1", "topic", 3, 4, 2, 1, "t1:topic"),
                         ("t2", "c`d", 8, 8, 4, 0, "t2:c`d")]
    empty = job.queues_from_topics(topics.select(":topic"), [], ":topic")
    assert empty.schema == schema("queues") and empty.count() == 0
    malformed = spark.createDataFrame([("t", "1\t2")], topics_schema(["b"]))
    with pytest.raises(Exception, match="INVALID_ARRAY_INDEX"):
        job.queues_from_topics(malformed, ["b"]).collect()


def test_topics_by_hand_with_the_data_source(spark: SparkSession, redis_server: RedisServer,
                                             fleets: dict[str, fleet.FleetSpec]) -> None:
    """docs/spark.md's recipe: the brokerNames from the groups table, the topic hashes read with
    a column per brokerName (key column ``topic``), then stacked."""
    groups = read_table(spark, "groups", url=redis_server.url, namespace=TOPICS_NS)
    names = sorted(r.brokerName for r in groups.select("brokerName").collect())
    topics = read_table(spark, tables.TOPICS, url=redis_server.url, namespace=TOPICS_NS,
                        partitions=3, schema=topics_schema(names))
    assert topics.columns[0] == "topic" and topics.count() == 2000 + 1  # odd-topic
    want = [r for r in fleet.raw_queue_rows(fleets["2"]) if r[1] != fleet.ORPHAN_GROUP]
    assert rows(job.queues_from_topics(topics, names)) == want
    with pytest.raises(Exception, match="topics_schema"):
        (spark.read.format("nsfleet").option("url", redis_server.url)
         .option("namespace", TOPICS_NS).option("table", "topics").load())
    with pytest.raises(Exception, match="names no hash field"):
        read_table(spark, tables.TOPICS, url=redis_server.url, namespace=TOPICS_NS,
                   schema=StructType().add("topic", StringType())).collect()


def test_topics_by_hand_with_spark_redis(spark: SparkSession, client: redis.Redis,
                                         fleets: dict[str, fleet.FleetSpec]) -> None:
    """The same with spark-redis' hash reads (emulated): ``keys.pattern`` of the topic hashes,
    ``key.column`` ``topic`` and the DDL of ``tables.topics_ddl``."""
    names = sorted({g.name for g in fleets["2"].groups})  # the draining group's too
    options = tables.spark_redis_options(TOPICS_NS, tables.TOPICS)
    assert options == {"keys.pattern": f"nsfleet:{{{TOPICS_NS}}}:topic:*", "key.column": "topic"}
    st = spark.createDataFrame([], tables.topics_ddl(names)).schema  # the DDL as Spark parses it
    assert st == topics_schema(names)
    topics = spark.createDataFrame(spark_redis.read(client, options, st), st, verifySchema=True)
    assert rows(job.queues_from_topics(topics, names)) == fleet.raw_queue_rows(fleets["2"])


def docs_block(marker: str) -> str:
    """The python code block of docs/spark.md that contains ``marker``."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    (block,) = [b for b in blocks if marker in b]
    return block


def test_docs_recipes_read_layout_2(spark: SparkSession, redis_server: RedisServer,
                                    client: redis.Redis,
                                    fleets: dict[str, fleet.FleetSpec]) -> None:
    """docs/spark.md's two recipes, run as written (on this suite's server and namespace; the
    spark-redis one through the emulation)."""
    want = [r[:6] for r in fleet.raw_queue_rows(fleets["2"]) if r[1] != fleet.ORPHAN_GROUP]
    assert f'"{tables.pattern("default", tables.TOPICS)}"' in DOCS.read_text()

    code = docs_block('"topics"').replace('"redis://127.0.0.1:6379/0"', repr(redis_server.url))
    scope: dict[str, Any] = {"spark": spark}
    exec(code.replace('"default"', repr(TOPICS_NS)), scope)
    assert rows(scope["queues"].drop("_key")) == want

    class SparkRedisReader:
        """``spark.read`` with spark-redis: the rows of tests/spark/spark_redis.py."""

        def __init__(self) -> None:
            self.options: dict[str, str] = {}

        def format(self, name: str) -> SparkRedisReader:
            assert name == "org.apache.spark.sql.redis"
            return self

        def schema(self, ddl: str) -> SparkRedisReader:
            self.ddl = ddl
            return self

        def option(self, key: str, value: str) -> SparkRedisReader:
            self.options[key] = value
            return self

        def load(self) -> DataFrame:
            st = spark.createDataFrame([], self.ddl).schema
            return spark.createDataFrame(spark_redis.read(client, self.options, st), st)

    code = docs_block("stack(").replace("{default}", f"{{{TOPICS_NS}}}")
    groups = read_table(spark, "groups", url=redis_server.url, namespace=TOPICS_NS)
    scope = {"spark": SimpleNamespace(read=SparkRedisReader()), "groups": groups}
    exec(code, scope)
    assert rows(scope["queues"]) == want
