"""Executor side of the ``nsfleet`` data source: one partition's rows, straight from Redis.

Partitioning scheme. SCAN cannot be split by cursor ranges: the cursor walks the hash table in
reverse-binary bucket order and its meaning changes when the table is resized, so "cursors 0..k"
is no stable subset of keys. Partitioning by Redis Cluster slot does not help either: every key of
a namespace carries the ``{<namespace>}`` hash tag, so a whole namespace lives in ONE slot on one
node. The scheme used instead:

* partition ``i`` of ``N`` runs its own full ``SCAN 0 MATCH <table pattern> COUNT scanCount``
  and keeps only the keys with ``crc32(key) % N == i``;
* the kept keys are read with pipelined ``HMGET`` of the requested columns, ``batchSize`` keys per
  round trip, inside the executor.

Every key is owned by exactly one partition (crc32 is deterministic in every process, unlike
Python's salted ``hash()``), so partitions are disjoint and together complete, and no key list
ever reaches the driver. SCAN may return a key twice (while the table rehashes), so each
partition drops keys it has already kept; memory is O(rows of the partition). The price is that
Redis walks the key space N times (each walk is O(keys in the database) and only the matching key
names cross the network N times); row payloads cross once. Keep N near the executor cores.

Consistency: SCAN returns every key that exists for the whole scan; a key deleted or expired
during it may or may not be returned. A broker row is a hash with a TTL (its deadline), so a key
may be returned by SCAN and be gone by the HMGET: HMGET then answers all nils and the row is
dropped - never emitted as a row of nulls (spark-redis does emit those, see docs/spark.md).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.crc import key_slot

from nsfleet.analytics.tables import Kind

_INT_RE = re.compile(r"[+-]?\d+")  # Java's parseInt/parseLong syntax; Python's int() is laxer


@dataclass(frozen=True, slots=True)
class OutputColumn:
    """One column of the rows read: a hash field (``field`` set) or the key suffix (None)."""

    name: str
    kind: Kind
    field: str | None


@dataclass(frozen=True, slots=True)
class ScanSpec:
    """Everything an executor needs to read one partition (picklable, no connection)."""

    url: str
    pattern: str
    columns: tuple[OutputColumn, ...]
    partitions: int = 4
    scan_count: int = 1000
    batch_size: int = 500
    probe: str = ""  # a field every row of the table has, see ``fields``

    @property
    def prefix(self) -> str:
        return self.pattern[:-1]

    @property
    def fields(self) -> tuple[str, ...]:
        """Hash fields to HMGET: the requested ones plus ``probe``, a field every row of the table
        has (its first column), so "all nil" tells a vanished row even when only the key column
        or fields a row lacks are asked for."""
        wanted = [c.field for c in self.columns if c.field is not None]
        return tuple(dict.fromkeys([*wanted, self.probe] if self.probe else wanted))


def owner(key: str, partitions: int) -> int:
    """The partition that reads ``key``."""
    return zlib.crc32(key.encode()) % partitions


def parse(kind: Kind, value: str, key: str, field: str) -> Any:
    """A stored string as its column type, strictly (a malformed number is an error, not a null)."""
    if kind is Kind.STRING:
        return value
    if kind is Kind.BOOLEAN:
        if value in ("true", "false"):
            return value == "true"
    elif _INT_RE.fullmatch(value):
        return int(value)
    raise ValueError(f"{key}: field {field}={value!r} is not a valid {kind.value}")


def _rows(spec: ScanSpec, keys: Sequence[str], replies: Sequence[Sequence[str | None]]
          ) -> Iterator[tuple[Any, ...]]:
    index = {f: i for i, f in enumerate(spec.fields)}
    cut = len(spec.prefix)
    for key, values in zip(keys, replies, strict=True):
        if all(v is None for v in values):
            continue  # expired or deleted between SCAN and HMGET: not a row any more
        row: list[Any] = []
        for c in spec.columns:
            if c.field is None:
                row.append(key[cut:])
            else:
                v = values[index[c.field]]
                row.append(None if v is None else parse(c.kind, v, key, c.field))
        yield tuple(row)


def _fetch(client: redis.Redis, spec: ScanSpec, keys: Sequence[str]
           ) -> Iterator[tuple[Any, ...]]:
    pipe = client.pipeline(transaction=False)  # a plain pipeline: no MULTI, one round trip
    for key in keys:
        pipe.hmget(key, spec.fields)
    yield from _rows(spec, keys, pipe.execute())


def owned_keys(client: redis.Redis, spec: ScanSpec, index: int) -> Iterator[list[str]]:
    """Batches of the keys partition ``index`` owns, each key once."""
    seen: set[str] = set()
    batch: list[str] = []
    cursor = 0
    while True:
        cursor, keys = client.scan(cursor, match=spec.pattern, count=spec.scan_count)
        for key in keys:
            if key not in seen and owner(key, spec.partitions) == index:
                seen.add(key)
                batch.append(key)
        if len(batch) >= spec.batch_size:
            yield batch
            batch = []
        if cursor == 0:
            break
    if batch:
        yield batch


def read_partition(client: redis.Redis, spec: ScanSpec, index: int) -> Iterator[tuple[Any, ...]]:
    """The typed rows of partition ``index`` (``client`` must decode responses)."""
    if not 0 <= index < spec.partitions:
        raise ValueError(f"partition {index} out of range 0..{spec.partitions - 1}")
    for batch in owned_keys(client, spec, index):
        yield from _fetch(client, spec, batch)


def read_hashes(client: redis.Redis, spec: ScanSpec, index: int
                ) -> Iterator[tuple[list[str], list[dict[str, str]]]]:
    """Partition ``index``'s hashes whole (HGETALL), in batches of (key suffixes, hashes), for a
    table whose columns are field names most hashes lack (layout 2's topic hashes, a field per
    brokerName): HMGET of every column would answer mostly nils. A hash holding none of the
    columns (vanished, or none of the schema's groups) is dropped, as ``read_partition`` does."""
    if not 0 <= index < spec.partitions:
        raise ValueError(f"partition {index} out of range 0..{spec.partitions - 1}")
    wanted, cut = set(spec.fields), len(spec.prefix)
    for keys in owned_keys(client, spec, index):
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.hgetall(key)
        kept = [(key[cut:], h) for key, h in zip(keys, pipe.execute(), strict=True)
                if not wanted.isdisjoint(h)]
        if kept:
            yield [k for k, _ in kept], [h for _, h in kept]


# --- connections and Redis Cluster ------------------------------------------------------------


def connect(url: str, endpoint: tuple[str, int] | None = None) -> redis.Redis:
    """A decoding client for ``url``, or for ``endpoint`` with the URL's credentials and TLS."""
    return redis.Redis.from_url(with_endpoint(url, endpoint) if endpoint else url,
                                decode_responses=True)


def namespace_client(url: str, key: str) -> redis.Redis:
    """A decoding client for the driver's own reads of the namespace holding ``key``: on the
    Redis Cluster node serving its slot (see ``slot_owner``), else on ``url``'s server."""
    client = connect(url)
    try:
        endpoint = slot_owner(client, key)
    except BaseException:
        client.close()
        raise
    if endpoint is None:
        return client
    client.close()
    return connect(url, endpoint)


def with_endpoint(url: str, endpoint: tuple[str, int]) -> str:
    """``url`` pointed at another host:port. redis-py lets URL options win over keyword
    arguments, so the URL itself is rewritten."""
    parts = urlsplit(url)
    host, port = endpoint
    auth = parts.netloc.rpartition("@")[0]
    hostport = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    netloc = f"{auth}@{hostport}" if auth else hostport
    # A cluster has database 0 only; keep the query (TLS options and the like).
    return urlunsplit((parts.scheme, netloc, "/0", parts.query, ""))


def redact(url: str) -> str:
    """``url`` without its password, for messages and the report (which gets shared)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    auth = f"{parts.username}:***" if parts.username else ":***"
    return urlunsplit(parts._replace(netloc=f"{auth}@{parts.netloc.rpartition('@')[2]}"))


def slot_owner(client: redis.Redis, key: str) -> tuple[str, int] | None:
    """The primary serving ``key``'s slot when ``client`` is a Redis Cluster node, else None.

    Every key of a namespace shares the ``{<namespace>}`` hash tag, so this one node holds the
    whole namespace and every partition scans it.
    """
    info = client.info("cluster")
    if not info.get("cluster_enabled"):
        return None
    slot = key_slot(key.encode())
    own_host = client.connection_pool.connection_kwargs.get("host", "127.0.0.1")
    for entry in _cluster_slots(client):
        start, end, primary = int(entry[0]), int(entry[1]), entry[2]
        if start <= slot <= end:
            host = primary[0].decode() if isinstance(primary[0], bytes) else str(primary[0])
            # An empty host means "the node you asked" (CLUSTER SLOTS, Redis >= 7 may send "?").
            return (host if host not in ("", "?") else str(own_host), int(primary[1]))
    raise RuntimeError(f"no Redis Cluster node serves slot {slot} (cluster not ready?)")


def _cluster_slots(client: redis.Redis) -> Iterable[Sequence[Any]]:
    # A standalone client applies no callback to CLUSTER SLOTS: the raw RESP reply comes back,
    # [[start, end, [host, port, id, ...], replica...], ...].
    reply: list[Sequence[Any]] = client.execute_command("CLUSTER SLOTS")
    return reply
