"""Spark fixtures: one local SparkSession for the whole test session, and the test fleet.

Start-up costs ~10 s (JVM, then the first Python worker), so the session is shared and never
stopped between tests. The fleet is written once per module (it takes well under a second) into
its own namespaces of the suite's redis-server; other suites' fixtures flush that server per test,
so each module repopulates rather than trusting a session-wide copy.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator

import pytest
import redis
from pyspark.sql import SparkSession

from nsfleet.analytics.session import get_session
from nsfleet.redis_server import RedisServer
from tests.spark import fleet

TEST_CONF = {
    "spark.ui.enabled": "false",  # no web UI port opened by tests
    "spark.sql.shuffle.partitions": "2",  # tiny tables: fewer, cheaper tasks
    "spark.default.parallelism": "2",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        if os.environ.get("CI"):
            raise RuntimeError("Java 17 is required for the Spark tests")
        pytest.skip("no Java runtime: Spark tests skipped")
    # get_session also points PYSPARK_PYTHON at this interpreter and binds to 127.0.0.1.
    session, _owned = get_session("local[2]", app_name="nsfleet-tests", conf=TEST_CONF)
    yield session
    session.stop()


def clear_namespace(url: str, namespace: str) -> None:
    """Delete one namespace's keys (not FLUSHALL: the server is shared with other suites)."""
    client = redis.Redis.from_url(url)
    try:
        batch = list(client.scan_iter(match=f"nsfleet:{{{namespace}}}:*", count=1000))
        for i in range(0, len(batch), 500):
            client.delete(*batch[i:i + 500])
    finally:
        client.close()


@pytest.fixture(scope="module")
def fleet_spec(redis_server: RedisServer) -> fleet.FleetSpec:
    """The 200-broker / 2,000-topic fleet in namespace ``fleet`` (plus a decoy ``other``)."""
    for ns in ("fleet", "other"):
        clear_namespace(redis_server.url, ns)
    spec = asyncio.run(fleet.populate(redis_server.url, "fleet"))
    asyncio.run(fleet.populate_other(redis_server.url, "other"))
    return spec
