"""``nsfleet analytics``: read a live namespace with Spark and write a fleet report folder.

The top-level CLI wires it with ``add_parser(subparsers)`` and calls ``run(args)``. pyspark,
pandas and matplotlib (the ``spark`` extra) are imported inside ``run`` only, so the rest of the
CLI neither pays for nor requires them.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from nsfleet.config import default_data_dir
from nsfleet.domain import validation
from nsfleet.embedded import running_url

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
TABLE_NAMES = ("brokers", "groups", "queues", "kv")


def default_redis_url(environ: Mapping[str, str]) -> str:
    """$NSFLEET_REDIS_URL, else the embedded Redis of a worker running with the data directory
    of $NSFLEET_DATA_DIR or the default one (``nsfleet serve`` with no --redis-url writes its
    URL there, in ``redis.url``), else localhost."""
    if environ.get("NSFLEET_REDIS_URL"):
        return environ["NSFLEET_REDIS_URL"]
    return (running_url(environ.get("NSFLEET_DATA_DIR") or default_data_dir())
            or DEFAULT_REDIS_URL)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
               ) -> argparse.ArgumentParser:
    """Add the ``analytics`` sub-command; returns its parser (the caller may set_defaults)."""
    p = subparsers.add_parser(
        "analytics", help="report on the fleet with Spark (needs the 'spark' extra and Java 17)",
        allow_abbrev=False,
        description="Read a namespace's route tables from Redis with PySpark and write a report "
                    "folder: Parquet tables, summary.md, summary.json and PNG charts.")
    p.add_argument("--redis-url", default=None,
                   help="Redis URL (default: $NSFLEET_REDIS_URL, else the embedded Redis of "
                        "a running nsfleet serve, whose URL is in redis.url of its data "
                        "directory ($NSFLEET_DATA_DIR, else the default one), else "
                        f"{DEFAULT_REDIS_URL})")
    p.add_argument("--namespace", default="default", help="nsfleet namespace (default: default)")
    p.add_argument("--out", default="nsfleet-report", type=Path,
                   help="report folder, created if missing; files in it are replaced "
                        "(default: ./nsfleet-report)")
    p.add_argument("--master", default="local[*]",
                   help="Spark master URL (default: local[*]); the executors must reach Redis "
                        "and run the same Python with nsfleet installed")
    p.add_argument("--partitions", type=int, default=None,
                   help="read partitions per table (default: Spark's default parallelism)")
    p.add_argument("--scan-count", type=int, default=1000, help="SCAN COUNT hint (default: 1000)")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark configuration, repeatable (e.g. spark.pyspark.python=...)")
    return p


def _conf(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--conf {pair!r} is not KEY=VALUE")
        out[key.strip()] = value
    return out


def redis_time_ms(url: str) -> int:
    """Redis server time: the clock every deadline in the store was computed with."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        seconds, micros = client.time()
        return int(seconds) * 1000 + int(micros) // 1000
    finally:
        client.close()


def run(args: argparse.Namespace) -> int:
    """Run the report; 0 on success, 1 when Redis or Spark fail, 2 on invalid arguments."""
    console = Console(stderr=True)
    try:
        namespace = validation.namespace(args.namespace)
        conf = _conf(args.conf)
        if args.partitions is not None and args.partitions < 1:
            raise ValueError("--partitions must be >= 1")
        if args.scan_count < 1:
            raise ValueError("--scan-count must be >= 1")
    except ValueError as exc:
        console.print(f"[red]nsfleet analytics: {exc}[/red]")
        return 2
    try:
        import redis

        from nsfleet.analytics import job
        from nsfleet.analytics.scan import redact
        from nsfleet.analytics.session import get_session
    except ImportError as exc:  # pragma: no cover - the spark extra is part of the test deps
        # markup=False: rich would read "[spark]" as a style tag and drop it.
        console.print(f"nsfleet analytics needs the 'spark' extra, best in a venv of its own "
                      f"(python3 -m venv .venv-spark && .venv-spark/bin/pip install "
                      f"'nsfleet[spark]'): installed into the venv a worker runs from, it "
                      f"reinstalls nsfleet under that worker: {exc}", style="red", markup=False)
        return 1

    args.redis_url = args.redis_url or default_redis_url(os.environ)
    out = Path(args.out)
    # connect, start Spark, one per table read, one per result table, totals, write.
    steps = 2 + len(TABLE_NAMES) + len(job.Analysis.__dataclass_fields__) + 2
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), console=console)
    with progress:
        task = progress.add_task("connecting to Redis", total=steps)

        def done(next_step: str) -> None:
            progress.update(task, advance=1, description=next_step)

        try:
            redis_time_ms(args.redis_url)  # fail fast, before paying for a Spark start
        except (redis.RedisError, ValueError) as exc:  # ValueError: a malformed URL
            progress.stop()
            console.print(f"[red]nsfleet analytics: cannot reach {redact(args.redis_url)}: "
                          f"{exc}[/red]")
            return 1
        done(f"starting Spark ({args.master})")
        spark, owned = get_session(args.master, conf=conf)
        done("reading brokers")
        try:
            summary = _report(spark, args, namespace, out, done)
        except Exception as exc:
            progress.stop()
            console.print_exception(max_frames=4)
            console.print(f"[red]nsfleet analytics failed: {type(exc).__name__}[/red]")
            return 1
        finally:
            if owned:
                spark.stop()
    c = summary["counts"]
    odd = c["queuesWithoutGroup"] + c["groupsWithoutLiveMember"] + c["brokersWithoutGroup"]
    console.print(f"report written to [bold]{out}[/bold]: {c['brokers']} live brokers, "
                  f"{c['groups']} groups, {c['topics']} topics, "
                  f"{c['groupsWithoutMaster']} groups without a master, {odd} inconsistencies")
    return 0


def _report(spark: SparkSession, args: argparse.Namespace, namespace: str, out: Path,
            done: Callable[[str], None]) -> dict[str, Any]:
    from nsfleet.analytics import job, report

    partitions = args.partitions or spark.sparkContext.defaultParallelism
    tables = job.load_tables(spark, args.redis_url, namespace, partitions, args.scan_count)
    tables.cache()
    # The description shown while each step runs; done() moves to the next one.
    labels = iter([*(f"reading {t}" for t in TABLE_NAMES[1:]),
                   *(f"computing {f}" for f in job.Analysis.__dataclass_fields__),
                   "counting totals", "writing the report", "done"])
    try:
        for name in TABLE_NAMES:
            getattr(tables, name).count()  # materializes the cached snapshot
            done(next(labels))
        if job.settle_layout(spark, tables, args.redis_url, namespace, partitions,
                             args.scan_count):
            tables.queues.count()
        # "Now" is taken after the snapshot is read: every heartbeat read is then in the past
        # (age >= 0); a broker whose deadline passed since it was read shows remainingMs < 0.
        now_ms = redis_time_ms(args.redis_url)
        analysis = job.analyze(tables, now_ms)
        results = {}
        for name, df in analysis.items():
            results[name] = df.toPandas()
            done(next(labels))
        totals = job.totals(tables)
        done(next(labels))
        summary = report.write_report(out, report.ReportData(
            namespace, args.redis_url, now_ms, totals, results))
        done(next(labels))
        return summary
    finally:
        tables.unpersist()


def main(argv: list[str] | None = None) -> int:
    """``python -m nsfleet.analytics.cli analytics ...``, for use before (or without) the
    top-level ``nsfleet`` CLI."""
    parser = argparse.ArgumentParser(prog="nsfleet", allow_abbrev=False)
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
