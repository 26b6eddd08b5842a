"""What spark-redis (``format("org.apache.spark.sql.redis")``, hash model) does on a read, in
Python - the connector exists for Spark 3.x / Scala 2.12 only, so it cannot run here.

Followed from RedisLabs/spark-redis (master, 2024): ``RedisSourceRelation.buildScan`` /
``scanRows``, ``HashRedisPersistence.load``/``decodeRow``, ``ParseUtils.parseFields``,
``RedisKeysRDD.getKeys``:

* keys: ``SCAN 0 MATCH <keys.pattern> COUNT <scan.count>`` (default 100) into a set;
* values: pipelined ``HMGET key <every required column>`` - the key column too, which a hash
  does not have, so it comes back nil and is then replaced;
* key column: when the pattern ends with its only ``*``, the key minus the pattern's prefix
  (``tableKey``), else the whole key; default name ``_id``;
* parsing: nil stays null; IntegerType ``Integer.parseInt``, LongType ``Long.parseLong``,
  BooleanType ``Boolean.parseBoolean`` (true only for "true", any case), strings as they are;
* rows whose HMGET is all nil are KEPT when ``keys.pattern`` is a pattern (only a literal key is
  filtered), so a key that expires between SCAN and HMGET becomes a row of nulls plus its key.
"""

from __future__ import annotations

import re
from typing import Any

import redis
from pyspark.sql.types import BooleanType, IntegerType, LongType, StructType

_JAVA_INT = re.compile(r"[+-]?\d+")
INT_RANGE = (-(2**31), 2**31 - 1)
LONG_RANGE = (-(2**63), 2**63 - 1)


def _java_integer(value: str, bounds: tuple[int, int]) -> int:
    if not _JAVA_INT.fullmatch(value) or not bounds[0] <= int(value) <= bounds[1]:
        raise ValueError(f"NumberFormatException: For input string: {value!r}")
    return int(value)


def parse_value(data_type: Any, value: str | None) -> Any:
    if value is None:
        return None
    if isinstance(data_type, IntegerType):
        return _java_integer(value, INT_RANGE)
    if isinstance(data_type, LongType):
        return _java_integer(value, LONG_RANGE)
    if isinstance(data_type, BooleanType):
        return value.lower() == "true"
    return value


def table_key(keys_pattern: str, key: str) -> str:
    if keys_pattern.endswith("*") and keys_pattern.count("*") == 1:
        return key[len(keys_pattern) - 1:]
    return key


def read(client: redis.Redis, options: dict[str, str], schema: StructType
         ) -> list[tuple[Any, ...]]:
    """The rows ``spark.read.format("org.apache.spark.sql.redis").options(**options)
    .schema(schema).load()`` would return, in no particular order (``client`` decodes)."""
    pattern = options["keys.pattern"]
    key_name = options.get("key.column", "_id")
    scan_count = int(options.get("scan.count", "100"))
    max_pipeline = int(options.get("max.pipeline.size", "100"))
    keys = sorted(set(client.scan_iter(match=pattern, count=scan_count)))
    required = [f.name for f in schema.fields]
    replies: list[list[str | None]] = []
    for i in range(0, len(keys), max_pipeline):
        pipe = client.pipeline(transaction=False)
        for key in keys[i:i + max_pipeline]:
            pipe.hmget(key, required)
        replies.extend(pipe.execute())
    out = []
    for key, values in zip(keys, replies, strict=True):
        fields = dict(zip(required, values, strict=True))
        fields[key_name] = table_key(pattern, key)
        out.append(tuple(parse_value(f.dataType, fields[f.name]) for f in schema.fields))
    return out
