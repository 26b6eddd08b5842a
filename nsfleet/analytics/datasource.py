"""The ``nsfleet`` PySpark Python Data Source (Spark >= 4.0): route tables as DataFrames.

    from nsfleet.analytics.datasource import register
    register(spark)
    brokers = (spark.read.format("nsfleet")
               .option("url", "redis://127.0.0.1:6379/0").option("namespace", "default")
               .option("table", "brokers").option("partitions", 8).load())

Options: ``url`` (redis:// or rediss:// URL; default redis://127.0.0.1:6379/0), ``namespace``
(default "default"), ``table`` (a row table of ``tables.TABLES``, or ``topics``; required),
``partitions`` (default 4), ``scanCount`` (SCAN COUNT, default 1000), ``batchSize`` (HMGET per
pipeline, default 500), ``keyColumn`` (name of the key-suffix column, default ``_key``; ``topic``
for ``topics``). A schema given with ``.schema(...)`` selects and types columns by name, like
spark-redis does; ``topics`` (layout 2's topic hashes) needs one, a string column per brokerName
(``topics_schema``).

``partitions()`` runs in the driver's Python worker and only plans (and, for a Redis Cluster,
asks which node serves the namespace's slot); keys are listed and rows read by ``read()`` in the
executors, see ``nsfleet.analytics.scan`` for the partitioning scheme.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import redis
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructType,
)

from nsfleet.analytics import scan, tables
from nsfleet.analytics.tables import Kind
from nsfleet.domain import validation

FORMAT = "nsfleet"
DEFAULT_URL = "redis://127.0.0.1:6379/0"

_KINDS: dict[type[DataType], Kind] = {
    StringType: Kind.STRING, IntegerType: Kind.INT, LongType: Kind.LONG, BooleanType: Kind.BOOLEAN,
}
_TYPES: dict[Kind, DataType] = {k: t() for t, k in _KINDS.items()}


def schema(table: str, key_column: str = tables.KEY_COLUMN) -> StructType:
    """The table's default schema (every column nullable, the key column last). Built in Python
    so that no JVM is needed (the DDL text is ``tables.ddl``)."""
    st = StructType()
    for c in tables.columns(table):
        st.add(c.name, _TYPES[c.kind], True)
    return st.add(key_column, StringType(), True)


def topics_schema(broker_names: Iterable[str], key_column: str = tables.TOPICS_KEY_COLUMN
                  ) -> StructType:
    """Schema of ``topics``: the key column (the topic), then a string column per brokerName."""
    st = StructType().add(key_column, StringType(), True)
    for name in broker_names:
        st.add(name, StringType(), True)
    return st


@dataclass(frozen=True, slots=True)
class ReadOptions:
    url: str
    namespace: str
    table: str
    partitions: int
    scan_count: int
    batch_size: int
    key_column: str

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        """Validated options; names are case-insensitive as everywhere in Spark."""
        opts = {k.lower(): v for k, v in options.items()}
        table = opts.get("table") or ""
        if table != tables.TOPICS:
            tables.columns(table)  # raises on an unknown or missing table
        return cls(
            url=opts.get("url") or DEFAULT_URL,
            namespace=validation.namespace(opts.get("namespace") or "default"),
            table=table,
            partitions=_positive(opts, "partitions", 4),
            scan_count=_positive(opts, "scancount", 1000),
            batch_size=_positive(opts, "batchsize", 500),
            key_column=opts.get("keycolumn") or tables.default_key_column(table),
        )


def _positive(opts: Mapping[str, str], name: str, default: int) -> int:
    raw = opts.get(name)
    if raw in (None, ""):
        return default
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"option {name}={raw!r} is not an integer") from None
    if n < 1:
        raise ValueError(f"option {name}={n} must be >= 1")
    return n


def output_columns(opts: ReadOptions, schema: StructType) -> tuple[scan.OutputColumn, ...]:
    """Map the (default or user-given) schema onto hash fields and the key column."""
    out: list[scan.OutputColumn] = []
    for f in schema.fields:
        kind = _KINDS.get(type(f.dataType))
        if kind is None:
            raise ValueError(f"column {f.name}: type {f.dataType.simpleString()} is not supported "
                             f"(string, int, bigint, boolean)")
        out.append(scan.OutputColumn(f.name, kind, None if f.name == opts.key_column else f.name))
    return tuple(out)


@dataclass(frozen=True)
class RedisPartition(InputPartition):
    """Partition ``index`` of ``count``; ``endpoint`` is the Redis Cluster node to scan, if any."""

    index: int
    count: int
    endpoint: tuple[str, int] | None = None


class NsfleetReader(DataSourceReader):
    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        # A topic hash has no field every one holds: a hash none of whose brokerName columns is
        # there has no row for them, and is dropped like a vanished row.
        probe = "" if opts.table == tables.TOPICS else tables.columns(opts.table)[0].name
        self.spec = scan.ScanSpec(
            url=opts.url, pattern=tables.pattern(opts.namespace, opts.table),
            columns=output_columns(opts, schema), probe=probe, partitions=opts.partitions,
            scan_count=opts.scan_count, batch_size=opts.batch_size)
        if not self.spec.fields:
            raise ValueError(f"table {opts.table}: the schema names no hash field to read "
                             f"(for topics: a string column per brokerName)")
        self.arrow_schema: pa.Schema | None = None  # topics: read as Arrow batches
        if opts.table == tables.TOPICS:
            if any(c.kind is not Kind.STRING for c in self.spec.columns):
                raise ValueError("table topics: every column is a string")
            self.arrow_schema = pa.schema([pa.field(f.name, pa.string(), f.nullable)
                                           for f in schema.fields])

    def partitions(self) -> Sequence[InputPartition]:
        # Planning only: one round trip to learn whether the URL is a cluster node, no key listed.
        client = scan.connect(self.opts.url)
        try:
            endpoint = scan.slot_owner(client, self.spec.prefix)
        finally:
            client.close()
        return [RedisPartition(i, self.spec.partitions, endpoint)
                for i in range(self.spec.partitions)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...] | pa.RecordBatch]:
        assert isinstance(partition, RedisPartition)
        client = scan.connect(self.spec.url, partition.endpoint)
        try:
            if self.arrow_schema is not None:
                yield from self._topic_batches(client, partition.index, self.arrow_schema)
            else:
                yield from scan.read_partition(client, self.spec, partition.index)
        finally:
            client.close()

    def _topic_batches(self, client: redis.Redis, index: int, arrow_schema: pa.Schema
                       ) -> Iterator[pa.RecordBatch]:
        """Layout 2's topic hashes as Arrow batches, a column per brokerName. A topic is on few
        of the groups, so most of a row is null: the columns are filled from the fields present,
        and returned as Arrow (Spark converts returned tuples value by value, null or not)."""
        column = {c.field: i for i, c in enumerate(self.spec.columns) if c.field is not None}
        for suffixes, hashes in scan.read_hashes(client, self.spec, index):
            values: list[list[str | None]] = [
                suffixes if c.field is None else [None] * len(hashes) for c in self.spec.columns]
            for row, fields in enumerate(hashes):
                for field, value in fields.items():
                    if field in column:
                        values[column[field]][row] = value
            yield pa.RecordBatch.from_arrays([pa.array(v, pa.string()) for v in values],
                                             schema=arrow_schema)


class NsfleetDataSource(DataSource):
    """``spark.read.format("nsfleet")``: one nsfleet route table per DataFrame."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        opts = ReadOptions.parse(self.options)
        if opts.table == tables.TOPICS:
            raise ValueError("table topics has a column per brokerName: give them with "
                             ".schema(datasource.topics_schema(names))")
        return schema(opts.table, opts.key_column)

    def reader(self, schema: StructType) -> DataSourceReader:
        return NsfleetReader(ReadOptions.parse(self.options), schema)


def register(spark: SparkSession) -> None:
    """Make ``format("nsfleet")`` available in this session (idempotent)."""
    spark.dataSource.register(NsfleetDataSource)


def read_table(spark: SparkSession, table: str, *, url: str = DEFAULT_URL,
               namespace: str = "default", partitions: int = 4, scan_count: int = 1000,
               schema: StructType | None = None, key_column: str | None = None) -> DataFrame:
    """One table as a DataFrame (registers the data source first); ``schema`` is required for
    ``topics`` (``topics_schema``)."""
    register(spark)
    reader = (spark.read.format(FORMAT).option("url", url).option("namespace", namespace)
              .option("table", table).option("partitions", str(partitions))
              .option("scanCount", str(scan_count)))
    if key_column:
        reader = reader.option("keyColumn", key_column)
    return (reader.schema(schema) if schema is not None else reader).load()
