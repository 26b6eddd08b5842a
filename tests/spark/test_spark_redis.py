"""The route tables are readable the way spark-redis reads hashes (``keys.pattern`` +
``key.column``), with the options and schemas docs/spark.md gives - checked with an emulation
of the connector (tests/spark/spark_redis.py), which cannot run on Spark 4."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from pyspark.sql import SparkSession

from nsfleet.analytics import tables
from nsfleet.analytics.datasource import schema
from nsfleet.redis_server import RedisServer
from tests.spark import fleet, spark_redis

pytestmark = [pytest.mark.spark, pytest.mark.redis]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "spark.md"


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_server.url, decode_responses=True)
    yield c
    c.close()


@pytest.mark.parametrize("table", list(tables.TABLES))
def test_spark_redis_reads_typed_complete_rows(spark: SparkSession, client: redis.Redis,
                                               redis_server: RedisServer,
                                               fleet_spec: fleet.FleetSpec, table: str) -> None:
    options = tables.spark_redis_options("fleet", table)
    assert options == {"keys.pattern": f"nsfleet:{{fleet}}:{tables_prefix(table)}:*",
                       "key.column": "_key"}
    st = schema(table)
    got = spark_redis.read(client, options, st)
    assert sorted(got, key=repr) == fleet.typed_rows(redis_server.url, "fleet", table)
    assert all(v is not None for row in got for v in row)  # complete: every field present
    # Spark accepts the values as the schema's types (createDataFrame verifies each row).
    df = spark.createDataFrame(got, st, verifySchema=True)
    assert df.schema == st


def tables_prefix(table: str) -> str:
    return {"brokers": "broker", "groups": "group", "queues": "queue", "kv": "kv",
            "broker_sets": "ctl:set", "replicas": "ctl:replica"}[table]


def test_key_column_is_the_suffix_after_the_pattern_prefix(client: redis.Redis,
                                                           fleet_spec: fleet.FleetSpec) -> None:
    st = schema("brokers", "id")
    got = spark_redis.read(client, tables.spark_redis_options("fleet", "brokers", "id"), st)
    assert len(got) == fleet_spec.live_brokers
    assert all(row[-1] == f"{row[0]}:{row[1]}" for row in got)  # <cluster>:<brokerAddr>
    # KV keys keep the key's escaping; the row's own fields hold the real names.
    kv = {r[-1]: r for r in spark_redis.read(client, tables.spark_redis_options("fleet", "kv"),
                                             schema("kv"))}
    assert kv["ns%3Awith%3Acolons:a%3Akey%25with%3Aspecials"][:2] == (
        "ns:with:colons", "a:key%with:specials")


def test_spark_redis_keeps_vanished_keys_as_null_rows(redis_server: RedisServer,
                                                      fleet_spec: fleet.FleetSpec) -> None:
    """The documented difference: with a pattern, spark-redis does not drop a key that expired
    between SCAN and HMGET - it returns nulls and the key (filter on a non-key column)."""
    vanishing = fleet.VanishingRedis.from_url(redis_server.url, decode_responses=True)
    try:
        got = spark_redis.read(vanishing, tables.spark_redis_options("fleet", "groups"),
                               schema("groups"))
    finally:
        vanishing.close()
    assert vanishing.vanished
    nulls = [r for r in got if r[0] is None]
    assert len(nulls) == len(vanishing.vanished)
    assert all(r[:4] == (None, None, None, None) and r[4] for r in nulls)


def test_java_parsing_rules() -> None:
    assert spark_redis.parse_value(schema("groups")["enableActingMaster"].dataType, "TRUE")
    assert not spark_redis.parse_value(schema("groups")["enableActingMaster"].dataType, "yes")
    with pytest.raises(ValueError, match="NumberFormatException"):
        spark_redis.parse_value(schema("queues")["perm"].dataType, str(2**31))
    assert spark_redis.table_key("a:*", "a:b:c") == "b:c"
    assert spark_redis.table_key("a:*:x*", "a:b:x") == "a:b:x"  # two '*': the key unmodified


def test_docs_give_the_options_and_schema_of_every_table() -> None:
    text = DOCS.read_text()
    for table in tables.TABLES:
        assert f'"{tables.pattern("default", table)}"' in text, table
        assert tables.ddl(table) in text, table
    assert '"key.column", "_key"' in text
