"""``nsfleet analytics`` end to end, and the job's DataFrame functions on hand-made frames."""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import DataFrame, SparkSession

from nsfleet.analytics import cli, job
from nsfleet.analytics.datasource import schema
from nsfleet.redis_server import RedisServer, free_port
from tests.spark import fleet

pytestmark = [pytest.mark.spark, pytest.mark.redis]

TABLE_FILES = ("brokers_by_cluster_zone", "group_topics", "queue_skew", "groups_without_master",
               "read_only_topics", "heartbeats", "inconsistencies", "controller_broker_sets")
CHART_FILES = ("brokers_by_cluster_zone", "topics_per_group", "queue_skew", "heartbeat_age",
               "deadline_headroom")


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="nsfleet")
    cli.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["analytics", *argv])


def expected_from_redis(url: str, namespace: str) -> dict[str, Any]:
    """The summary's numbers, computed from SCAN + HGETALL without Spark."""
    brokers = list(fleet.dump(url, namespace, "brokers").values())
    groups = list(fleet.dump(url, namespace, "groups").values())
    queues = fleet.queue_rows(url, namespace)
    kv = list(fleet.dump(url, namespace, "kv").values())
    sets = list(fleet.dump(url, namespace, "broker_sets").values())
    group_names = {g["brokerName"] for g in groups}
    live_names = {b["brokerName"] for b in brokers}
    master_names = {b["brokerName"] for b in brokers if b["brokerId"] == "0"}
    by_topic: dict[str, list[dict[str, str]]] = defaultdict(list)
    for q in queues:
        by_topic[q["topic"]].append(q)
    multi = {t: [int(q["writeQueueNums"]) for q in qs] for t, qs in by_topic.items()
             if len(qs) > 1}
    skews = {t: max(w) / (sum(w) / len(w)) for t, w in multi.items() if sum(w)}
    masters = sum(b["brokerId"] == "0" for b in brokers)
    counts = {
        "brokers": len(brokers), "masters": masters, "slaves": len(brokers) - masters,
        "zones": len({b["zoneName"] for b in brokers} - {""}),
        "groups": len(groups), "clusters": len({g["cluster"] for g in groups}),
        "queueRows": len(queues), "topics": len(by_topic),
        "readQueues": sum(int(q["readQueueNums"]) for q in queues),
        "writeQueues": sum(int(q["writeQueueNums"]) for q in queues),
        "kvEntries": len(kv), "kvNamespaces": len({e["namespace"] for e in kv}),
        "groupsWithoutMaster": len(group_names - master_names),
        "readOnlyTopics": sum(all(int(q["perm"]) & 2 == 0 for q in qs)
                              for qs in by_topic.values()),
        "multiGroupTopics": len(multi),
        "skewedTopics": sum(s >= 2 for s in skews.values()),
        "queuesWithoutGroup": sum(q["brokerName"] not in group_names for q in queues),
        "groupsWithoutLiveMember": len(group_names - live_names),
        "brokersWithoutGroup": sum(b["brokerName"] not in group_names for b in brokers),
        "controllerBrokerSets": len(sets),
        "controllerSetsWithoutMaster": sum(s["masterBrokerId"] == "" for s in sets),
    }
    per_zone = Counter((b["cluster"], b["zoneName"] or job.NO_ZONE) for b in brokers)
    return {"counts": counts, "per_zone": per_zone, "brokers": brokers, "skews": skews}


def test_analytics_end_to_end(spark: SparkSession, redis_server: RedisServer,
                              fleet_spec: fleet.FleetSpec, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report"
    args = parse("--redis-url", redis_server.url, "--namespace", "fleet", "--out", str(out),
                 "--master", "local[2]", "--partitions", "3")
    assert cli.run(args) == 0
    assert "report written to" in capsys.readouterr().err
    assert spark.range(3).count() == 3  # run() reused the active session and left it running

    summary = json.loads((out / "summary.json").read_text())
    want = expected_from_redis(redis_server.url, "fleet")
    assert summary["counts"] == want["counts"]
    # The fixture's known shape, as a sanity check on the expectation itself.
    assert (want["counts"]["brokers"], want["counts"]["queuesWithoutGroup"],
            want["counts"]["groupsWithoutLiveMember"]) == (200, 3, 6)

    got_zone = Counter({(r["cluster"], r["zone"]): r["brokers"]
                        for r in summary["brokersByClusterZone"]})
    assert got_zone == want["per_zone"]
    assert summary["maxSkew"]["skew"] == pytest.approx(max(want["skews"].values()))
    assert want["skews"][summary["maxSkew"]["topic"]] == pytest.approx(summary["maxSkew"]["skew"])

    now = summary["snapshotMs"]
    ages = np.array([now - int(b["lastUpdateTimestamp"]) for b in want["brokers"]], dtype=float)
    hb = summary["heartbeat"]
    assert hb["ageMs"]["min"] == ages.min() and hb["ageMs"]["max"] == ages.max() >= 0
    assert hb["ageMs"]["p90"] == pytest.approx(np.percentile(ages, 90))
    headroom = [(int(b["lastUpdateTimestamp"]) + int(b["heartbeatTimeoutMillis"]) - now)
                / int(b["heartbeatTimeoutMillis"]) for b in want["brokers"]]
    assert hb["nearDeadline"] == {f"{int(t * 100)}%": sum(h < t for h in headroom)
                                  for t in job.NEAR_DEADLINE}

    # Every table and chart, with the row counts the summary claims.
    frames = {name: pd.read_parquet(out / "tables" / f"{name}.parquet") for name in TABLE_FILES}
    c = summary["counts"]
    assert len(frames["heartbeats"]) == c["brokers"]
    assert len(frames["group_topics"]) == c["groups"]
    assert len(frames["queue_skew"]) == c["topics"]
    assert len(frames["groups_without_master"]) == c["groupsWithoutMaster"]
    assert len(frames["read_only_topics"]) == c["readOnlyTopics"]
    ctl = frames["controller_broker_sets"]
    assert list(ctl["brokerName"]) == ["ctl-a", "ctl-b"]  # the fixture's two sets
    assert list(ctl["masterBrokerId"]) == ["1", ""] and list(ctl["replicas"]) == [2, 2]
    assert list(ctl["masterRouted"]) == [False, False]  # no route registration in the fixture
    assert len(frames["brokers_by_cluster_zone"]) == len(want["per_zone"])
    assert Counter(frames["inconsistencies"]["kind"]) == {
        "queue_without_group": 3, "group_without_live_member": 6}
    assert set(frames["inconsistencies"].query("kind == 'group_without_live_member'")
               ["brokerName"]) == {f"stale-{j}" for j in range(6)}
    assert frames["group_topics"]["topics"].sum() == c["queueRows"] - c["queuesWithoutGroup"]
    for name in CHART_FILES:
        png = (out / "charts" / f"{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000, name

    md = (out / "summary.md").read_text()
    for label, key in (("live brokers", "brokers"), ("broker groups", "groups"),
                       ("topics", "topics"), ("masters", "masters"),
                       ("groups without a master", "groupsWithoutMaster"),
                       ("read-only topics", "readOnlyTopics"),
                       ("queue data without a group", "queuesWithoutGroup"),
                       ("groups with no live member", "groupsWithoutLiveMember"),
                       ("KV entries", "kvEntries")):
        assert f"| {label} | {want['counts'][key]} |" in md, label
    for name in CHART_FILES:
        assert f"(charts/{name}.png)" in md


def test_analytics_on_an_empty_namespace(spark: SparkSession, redis_server: RedisServer,
                                         tmp_path: Path) -> None:
    args = parse("--redis-url", redis_server.url, "--namespace", "nobody-here",
                 "--out", str(tmp_path), "--partitions", "1")
    assert cli.run(args) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["counts"].values()) == {0}
    assert summary["maxSkew"] is None and summary["heartbeat"]["ageMs"]["p50"] is None
    assert all((tmp_path / "charts" / f"{n}.png").stat().st_size > 0 for n in CHART_FILES)
    assert "_none_" in (tmp_path / "summary.md").read_text()


def test_analytics_fails_fast_without_redis(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    args = parse("--redis-url", f"redis://:secret@127.0.0.1:{free_port()}/0",
                 "--out", str(tmp_path / "r"))
    assert cli.run(args) == 1
    err = capsys.readouterr().err
    assert "cannot reach" in err and "secret" not in err
    assert not (tmp_path / "r").exists()


def test_analytics_rejects_bad_arguments(tmp_path: Path) -> None:
    assert cli.run(parse("--namespace", "no:colons", "--out", str(tmp_path))) == 2
    assert cli.run(parse("--partitions", "0", "--out", str(tmp_path))) == 2
    assert cli.run(parse("--conf", "novalue", "--out", str(tmp_path))) == 2


def test_parser_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NSFLEET_REDIS_URL", raising=False)
    args = parse()
    # No --redis-url: resolved when the job runs (default_redis_url, tested with the worker
    # parts): $NSFLEET_REDIS_URL, a running embedded Redis, localhost.
    assert (args.redis_url, args.namespace, args.out, args.master, args.partitions) == (
        None, "default", Path("nsfleet-report"), "local[*]", None)
    assert parse("--redis-url", "redis://redis.example:6380/1").redis_url == \
        "redis://redis.example:6380/1"


def test_job_functions_on_small_frames(spark: SparkSession) -> None:
    def df(table: str, rows: list[tuple[Any, ...]]) -> DataFrame:
        return spark.createDataFrame([(*r, "k") for r in rows], schema(table))

    brokers = df("brokers", [
        ("c1", "a:1", "g-ok", 0, "", 1_000, 10_000, 0, 0, 0, "z1"),
        ("c1", "a:2", "g-ok", 1, "", 9_000, 10_000, 0, 0, 0, "z1"),
        ("c1", "a:3", "g-slaves", 1, "", 5_000, 10_000, 0, 0, 0, ""),
        ("c2", "a:4", "g-nogroup", 0, "", 10_500, 1_000, 0, 0, 0, None),
    ])
    groups = df("groups", [("c1", "g-ok", False, "z1"), ("c1", "g-slaves", True, ""),
                           ("c1", "g-dead", False, "")])
    queues = df("queues", [
        ("even", "g-ok", 8, 8, 6, 0), ("even", "g-slaves", 8, 8, 6, 0),
        ("skewed", "g-ok", 1, 1, 6, 0), ("skewed", "g-slaves", 7, 7, 6, 0),
        ("ro", "g-ok", 4, 4, 4, 0), ("ro", "g-dead", 4, 4, 0, 0),
        ("mixed", "g-ok", 4, 4, 4, 0), ("mixed", "g-slaves", 4, 4, 2, 0),
        ("none", "g-ok", 4, 0, 6, 0), ("orphan", "g-gone", 4, 4, 6, 0),
    ])
    zones = {(r["cluster"], r["zone"]): (r["brokers"], r["masters"], r["slaves"])
             for r in job.brokers_by_cluster_zone(brokers).collect()}
    assert zones == {("c1", "z1"): (2, 1, 1), ("c1", job.NO_ZONE): (1, 0, 1),
                     ("c2", job.NO_ZONE): (1, 1, 0)}

    skew = {r["topic"]: r["skew"] for r in job.queue_skew(queues).collect()}
    assert skew["even"] == 1.0 and skew["skewed"] == pytest.approx(7 / 4)
    assert skew["none"] is None and skew["orphan"] == 1.0

    assert [r["topic"] for r in job.read_only_topics(queues).collect()] == ["ro"]

    no_master = {r["brokerName"]: (r["liveMembers"], r["liveBrokerIds"])
                 for r in job.groups_without_master(groups, brokers).collect()}
    assert no_master == {"g-slaves": (1, [1]), "g-dead": (0, None)}

    found = sorted((r["kind"], r["brokerName"], r["topic"])
                   for r in job.inconsistencies(groups, queues, brokers).collect())
    assert found == [("broker_without_group", "g-nogroup", None),
                     ("group_without_live_member", "g-dead", None),
                     ("queue_without_group", "g-gone", "orphan")]

    hb = {r["brokerAddr"]: r for r in job.heartbeats(brokers, 10_000).collect()}
    assert (hb["a:1"]["ageMs"], hb["a:1"]["remainingMs"], hb["a:1"]["headroom"]) == (
        9_000, 1_000, 0.1)
    assert hb["a:4"]["ageMs"] == -500  # a heartbeat after "now": the clocks are the caller's

    per_group = {r["brokerName"]: r for r in job.group_topics(groups, queues, brokers).collect()}
    assert (per_group["g-ok"]["topics"], per_group["g-ok"]["writableTopics"]) == (5, 3)
    assert (per_group["g-dead"]["liveMembers"], per_group["g-dead"]["hasLiveMaster"]) == (0, False)
