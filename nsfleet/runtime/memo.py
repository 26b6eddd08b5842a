"""A small memo of pure results keyed by an input that never changes once built.

Brokers re-send the same registration every 30 s. What the workers derive from it (the parsed
body, the validated and encoded table) is a pure function of that input, so it is remembered
for the same input: the same bytes, or the very same immutable table object. No answer can go
stale: a changed input is another key. Bounded by the topics it holds, oldest out first; the
bound must hold every broker's table a worker sees (brokers x topics), or brokers re-registering
in turn evict each other and nothing is ever found (1,000,000 topics: a few hundred MB at most).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class BoundedMemo(Generic[V]):
    def __init__(self, max_topics: int = 1_000_000) -> None:
        self.max_topics = max_topics
        self._entries: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._topics = 0
        self._lock = threading.Lock()  # filled from worker threads too (big tables)

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            return found[0]

    def put(self, key: Hashable, value: V, topics: int) -> None:
        if topics > self.max_topics:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._topics -= old[1]
            self._entries[key] = (value, topics)
            self._topics += topics
            while self._topics > self.max_topics:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._topics -= dropped

    def __len__(self) -> int:
        return len(self._entries)
