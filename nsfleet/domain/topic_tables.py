"""Topic tables decoded once per distinct table, for both protocols' registration bodies.

A broker sends its whole topic table with every registration; the DataVersion beside it changes
while the table often does not (the JMH writers bump it every time, a broker whenever it
persists its config). Decoding 10,000 topics into TopicConfig objects costs a worker ~30 ms of
event-loop time; finding the table's bytes costs ~0.5 ms (msgspec's ``Raw``), hashing them ~1 ms
(SHA-256 of 1.7 MB: 0.9 ms where the CPU has SHA instructions, as servers since ~2017 do;
BLAKE2b, which Python builds without SIMD, took 1.8 ms and a tenth of a worker's CPU in a
300-broker storm, by perf).
So each table is decoded once and remembered by a digest of the bytes that carry it: the same
table under a new DataVersion, or in another body, comes back as the very same tuple, which the
store in turn recognises (its validated, encoded chunks and digest are memoised by that object).

A decoder here accepts only the common shape (exact JSON types); anything else raises
``ValueError`` and the caller reads the body its generic way, so what is accepted reads exactly
as the generic path would read it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable
from typing import Final, TypeVar

import msgspec

from nsfleet.domain.model import (
    DEFAULT_PERM,
    DEFAULT_READ_QUEUE_NUMS,
    DEFAULT_WRITE_QUEUE_NUMS,
    DataVersion,
    TopicConfig,
)
from nsfleet.runtime.memo import BoundedMemo

T = TypeVar("T")


class TopicConfigJson(msgspec.Struct):
    """A TopicConfig as fastjson writes it; null or missing fields take Java's defaults."""

    topicName: str | None = None
    readQueueNums: int | None = None
    writeQueueNums: int | None = None
    perm: int | None = None
    topicSysFlag: int | None = None
    order: bool | None = None

    def config(self, key: str) -> TopicConfig:
        """What ``TopicConfig.from_json(key, ...)`` reads from the same JSON."""
        return TopicConfig(
            key if self.topicName is None else self.topicName,
            DEFAULT_READ_QUEUE_NUMS if self.readQueueNums is None else self.readQueueNums,
            DEFAULT_WRITE_QUEUE_NUMS if self.writeQueueNums is None else self.writeQueueNums,
            DEFAULT_PERM if self.perm is None else self.perm,
            self.topicSysFlag or 0, bool(self.order))


class DataVersionJson(msgspec.Struct):
    """A DataVersion as fastjson writes it (missing or null fields read as 0, as
    ``DataVersion.from_json`` reads them), for the typed readers of registration bodies."""

    counter: int | None = None
    timestamp: int | None = None
    stateVersion: int | None = None

    @staticmethod
    def value(dv: DataVersionJson | None) -> DataVersion:
        return (DataVersion() if dv is None else
                DataVersion(dv.counter or 0, dv.timestamp or 0, dv.stateVersion or 0))


# Remoting (fastjson), the shape a broker sends: every entry an object naming its topic, every
# number within Java's int; decoded straight into TopicConfigs (a 10,000-topic table in ~3.4 ms,
# against ~4.5 ms through TopicConfigJson), whose numbers need no second look.
_entries_as_sent: Final = msgspec.json.Decoder(dict[str, TopicConfig])
# Remoting (fastjson): a null entry carries nothing; the HTTP API takes objects only.
_nullable_entries: Final = msgspec.json.Decoder(dict[str, TopicConfigJson | None] | None)
_entries: Final = msgspec.json.Decoder(dict[str, TopicConfigJson] | None)

# Every table a worker sees (brokers x topics) must fit, or tables evict each other in turn.
_TABLES: BoundedMemo[object] = BoundedMemo()


def remembered(kind: Hashable, data: bytes | memoryview, decode: Callable[[], T],
               topics: Callable[[T], int]) -> T:
    """``decode()``'s result for these bytes, decoded only the first time they are seen.
    ``kind`` keeps different readings of the same bytes apart; ``topics`` sizes the entry. An
    exception from ``decode`` propagates and nothing is remembered."""
    key = (kind, hashlib.sha256(data).digest())
    found = _TABLES.get(key)
    if found is None:
        value = decode()
        _TABLES.put(key, value, topics(value))
        return value
    return found  # type: ignore[return-value]  # stored under this kind by this function


FastjsonTable = tuple[dict[str, TopicConfig], tuple[TopicConfig, ...], bool]


def fastjson_table(raw: bytes | memoryview) -> FastjsonTable:
    """A remoting body's ``topicConfigTable`` JSON: by topic name (a name listed twice keeps
    its last entry, as a Java map does) and as a tuple of those entries, and whether every
    number was proven within Java's int (the shape brokers send); remembered."""
    def decode() -> FastjsonTable:
        try:
            as_sent = _entries_as_sent.decode(raw)
        except msgspec.ValidationError:  # a null, a name left out, a number past Java's int
            pass
        else:
            by_name = {config.topic_name: config for config in as_sent.values()}
            return by_name, tuple(by_name.values()), True
        table: dict[str, TopicConfig] = {}
        for key, tc in (_nullable_entries.decode(raw) or {}).items():
            if tc is not None:
                config = tc.config(key)
                table[config.topic_name] = config
        return table, tuple(table.values()), False
    return remembered("fastjson", raw, decode, lambda v: len(v[1]))


def api_table(raw: bytes | memoryview) -> tuple[TopicConfig, ...]:
    """The HTTP API's ``topicConfigTable`` JSON: one TopicConfig per entry, in order (the model
    settles a name listed twice); remembered."""
    def decode() -> tuple[TopicConfig, ...]:
        return tuple(tc.config(key) for key, tc in (_entries.decode(raw) or {}).items())
    return remembered("api", raw, decode, len)
