"""The row tables as Spark sees them (the route tables and the controller's): column names,
value types and key prefixes; and layout 2's topic hashes, which the job turns into the
``queues`` rows (docs/queue-data-layouts.md).

One definition serves the ``nsfleet`` data source, the spark-redis schemas in docs/spark.md and
the tests, so a field added to a row in the Lua scripts needs adding here once. Types follow the
Java fields they mirror: ``long`` for ids, timestamps and versions, ``int`` for queue numbers and
perm, ``boolean`` for ``enableActingMaster``. Everything stored as "" (no zone, no HA address) is
read back as "" - the data source returns what Redis holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from nsfleet.store.keys import Keys

KEY_COLUMN = "_key"
"""Default name of the column holding the key suffix after the table prefix (e.g. for a queue row
``<topic>:<brokerName>``). Not ``key``: the kv table has a field of that name."""


class Kind(StrEnum):
    """A column's value type, spelled as Spark DDL."""

    STRING = "string"
    INT = "int"
    LONG = "bigint"
    BOOLEAN = "boolean"


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    kind: Kind


_S, _I, _L, _B = Kind.STRING, Kind.INT, Kind.LONG, Kind.BOOLEAN

TABLES: dict[str, tuple[Column, ...]] = {
    "brokers": tuple(Column(n, k) for n, k in (
        ("cluster", _S), ("brokerAddr", _S), ("brokerName", _S), ("brokerId", _L),
        ("haServerAddr", _S), ("lastUpdateTimestamp", _L), ("heartbeatTimeoutMillis", _L),
        ("dataVersionCounter", _L), ("dataVersionTimestamp", _L), ("stateVersion", _L),
        ("zoneName", _S))),
    "groups": tuple(Column(n, k) for n, k in (
        ("cluster", _S), ("brokerName", _S), ("enableActingMaster", _B), ("zoneName", _S))),
    "queues": tuple(Column(n, k) for n, k in (
        ("topic", _S), ("brokerName", _S), ("readQueueNums", _I), ("writeQueueNums", _I),
        ("perm", _I), ("topicSysFlag", _I))),
    "kv": tuple(Column(n, k) for n, k in (("namespace", _S), ("key", _S), ("value", _S))),
    # The controller's (docs/controller.md): masterBrokerId "" when the set has no master.
    "broker_sets": tuple(Column(n, k) for n, k in (
        ("brokerName", _S), ("clusterName", _S), ("nextBrokerId", _L), ("masterBrokerId", _S),
        ("masterAddress", _S), ("masterEpoch", _I), ("syncStateSet", _S),
        ("syncStateSetEpoch", _I))),
    "replicas": tuple(Column(n, k) for n, k in (
        ("brokerName", _S), ("brokerId", _L), ("brokerAddress", _S),
        ("registerCheckCode", _S))),
}

KEY_SUFFIX = {
    "brokers": "<cluster>:<brokerAddr>",
    "groups": "<brokerName>",
    "queues": "<topic>:<brokerName>",
    "kv": "<namespace>:<key> (':' as %3A, '%' as %25)",
    "broker_sets": "<brokerName>",
    "replicas": "<brokerName>:<brokerId>",
}
"""What the key column holds per table (documentation and error messages)."""


TOPICS = "topics"
"""Layout 2's queue data: one hash per topic ``P:topic:<topic>``, field brokerName, value
``QUEUE_VALUE`` joined by tabs. Not a row table (not in ``TABLES``): its columns are the
brokerNames, so a reader names them in its schema (``topics_ddl``)."""

TOPICS_KEY_COLUMN = "topic"
"""Default key column of ``topics``: the key suffix is the topic."""

QUEUE_VALUE = ("readQueueNums", "writeQueueNums", "perm", "topicSysFlag")
"""The queues columns a ``topics`` value holds, in order (the rest are the topic and the field)."""


def quote(name: str) -> str:
    """``name`` as a Spark identifier: a brokerName may hold '.', ' ', '`' (anything but ':')."""
    return "`" + name.replace("`", "``") + "`"


def topics_ddl(broker_names: Iterable[str], key_column: str = TOPICS_KEY_COLUMN) -> str:
    """Schema of ``topics`` with a string column per brokerName, the key column first."""
    return ", ".join([f"{quote(key_column)} string",
                      *(f"{quote(name)} string" for name in broker_names)])


def columns(table: str) -> tuple[Column, ...]:
    try:
        return TABLES[table]
    except KeyError:
        raise ValueError(f"unknown table {table!r}; expected one of {', '.join(TABLES)}") from None


def ddl(table: str, key_column: str = KEY_COLUMN) -> str:
    """The table's Spark schema as DDL, the key column last."""
    return ", ".join([f"{c.name} {c.kind}" for c in columns(table)] + [f"{key_column} string"])


def pattern(namespace: str, table: str) -> str:
    """SCAN MATCH pattern of the table's rows (also spark-redis' ``keys.pattern``)."""
    if table == TOPICS:
        return Keys(namespace).topic_routes("*")
    columns(table)
    return Keys(namespace).table_pattern(table)


def prefix(namespace: str, table: str) -> str:
    """The key prefix stripped to get the key column: the pattern without its trailing '*'."""
    return pattern(namespace, table)[:-1]


def default_key_column(table: str) -> str:
    return TOPICS_KEY_COLUMN if table == TOPICS else KEY_COLUMN


def spark_redis_options(namespace: str, table: str, key_column: str | None = None
                        ) -> dict[str, str]:
    """Options that make spark-redis (``format("org.apache.spark.sql.redis")``, Spark 3.x) read
    the table; pass ``ddl(table, key_column)`` (``topics_ddl(names)`` for ``topics``) as the
    schema. Connection options (``host``, ``port``, ``auth``, ``dbNum``) come on top."""
    return {"keys.pattern": pattern(namespace, table),
            "key.column": key_column or default_key_column(table)}
