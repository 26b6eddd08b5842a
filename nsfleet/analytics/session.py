"""SparkSession construction shared by ``nsfleet analytics`` and the test suite."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from nsfleet.analytics.datasource import register

LOG4J2 = Path(__file__).with_name("log4j2.properties")

BASE_CONF: dict[str, str] = {
    # The report collects small aggregates; Arrow makes toPandas() cheap.
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # rich draws the progress on stderr; Spark's own console bar would garble it.
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}
LOCAL_CONF: dict[str, str] = {
    # A local run needs no network exposure: bind the driver to loopback only.
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    # Tables have thousands of rows, not billions: the default 200 shuffle partitions would
    # only add task overhead.
    "spark.sql.shuffle.partitions": "8",
}


def use_this_interpreter() -> None:
    """Run Python workers with the interpreter running us, so they import the same nsfleet,
    redis and pyarrow (a ``spark.pyspark.python`` conf still wins on a remote cluster)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def get_session(master: str = "local[*]", app_name: str = "nsfleet-analytics",
                conf: Mapping[str, str] | None = None) -> tuple[SparkSession, bool]:
    """The active session if there is one (then ``owned`` is False and the caller must not stop
    it), else a new one on ``master``. The ``nsfleet`` data source is registered either way."""
    use_this_interpreter()
    active = SparkSession.getActiveSession()
    if active is not None:
        register(active)
        return active, False
    settings = dict(BASE_CONF)
    if master.startswith("local"):
        settings.update(LOCAL_CONF)
        # Silences "hostname resolves to a loopback address" and keeps block manager on loopback.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Quiet JVM logging unless the caller configures the driver's JVM options themselves.
    settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={LOG4J2.as_uri()}"
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark, True
