"""Which Redis ``nsfleet analytics`` reads with no --redis-url (docs/spark.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsfleet.analytics import cli as analytics_cli


def test_a_worker_s_data_dir_from_nsfleet_data_dir(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    default, chosen = tmp_path / "default", tmp_path / "chosen"
    default.mkdir()
    chosen.mkdir()
    monkeypatch.setattr(analytics_cli, "default_data_dir", lambda: str(default))
    (default / "redis.url").write_text("redis://127.0.0.1:1111/0\n")
    (chosen / "redis.url").write_text("redis://127.0.0.1:2222/0\n")
    env = {"NSFLEET_DATA_DIR": str(chosen)}
    assert analytics_cli.default_redis_url(env) == "redis://127.0.0.1:2222/0"
    assert analytics_cli.default_redis_url({}) == "redis://127.0.0.1:1111/0"
    assert analytics_cli.default_redis_url({"NSFLEET_DATA_DIR": str(tmp_path / "none")}) == \
        analytics_cli.DEFAULT_REDIS_URL  # no worker there: not the default dir's either
    assert analytics_cli.default_redis_url({**env, "NSFLEET_REDIS_URL": "redis://h:1/0"}) == \
        "redis://h:1/0"
