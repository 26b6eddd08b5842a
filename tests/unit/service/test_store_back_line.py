"""The "store back" log line says in words what the worker found when Redis returned: a cache
read again is no loss, and the line says so; only a store missing changes the worker saw says
that something is missing."""

from __future__ import annotations

from nsfleet.service.outage import store_back
from nsfleet.store import ViewMarker

SEEN = ViewMarker("run-1", 40)


def test_a_restarted_redis_with_every_change_lost_nothing() -> None:
    line = store_back(SEEN, ViewMarker("run-2", 40), kept=False)
    assert line.startswith("store back") and "new Redis process" in line
    assert "nothing was lost" in line and "changed while it was away" not in line


def test_changes_by_other_workers_lost_nothing() -> None:
    line = store_back(SEEN, ViewMarker("run-1", 45), kept=False)
    assert "changes other workers made" in line and "nothing was lost" in line


def test_a_store_without_the_latest_changes_says_so() -> None:
    line = store_back(SEEN, ViewMarker("run-2", 12), kept=False)
    assert "without the latest changes" in line and "nothing was lost" not in line
    assert "next heartbeat" in line


def test_a_kept_view_and_no_view() -> None:
    assert "cached routes stay" in store_back(SEEN, SEEN, kept=True)
    line = store_back(None, ViewMarker("run-2", 3), kept=False)
    assert line.startswith("store back") and "lost" not in line
