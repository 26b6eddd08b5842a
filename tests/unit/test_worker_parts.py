"""Settings, the sweeper and its mass-expiry guard, the route cache and the fleet config."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from nsfleet import cli, config
from nsfleet.domain.errors import ConfigBlacklisted, ValidationError
from nsfleet.domain.model import BrokerRegistration, DataVersion, TopicConfig
from nsfleet.metrics import Metrics
from nsfleet.service.nameserver import NameServer
from nsfleet.service.namesrv_config import NamesrvConfig
from nsfleet.service.route_cache import RouteCache
from nsfleet.service.sweeper import Sweeper
from nsfleet.store import RouteStore
from nsfleet.store.change_feed import Change


def _reg(i: int, timeout: int = 60_000) -> BrokerRegistration:
    return BrokerRegistration("c", f"10.0.0.{i}:10911", f"b{i}", 0,
                              heartbeat_timeout_millis=timeout, data_version=DataVersion(1, 1),
                              topic_configs=[TopicConfig(f"T{i}"), TopicConfig("shared")])


def test_settings_precedence_flags_over_env_over_defaults() -> None:
    parser = argparse.ArgumentParser()
    config.add_arguments(parser)
    env = {"NSFLEET_HTTP_PORT": "9000", "NSFLEET_NAMESPACE": "prod", "NSFLEET_ROUTE_CACHE": "off"}
    s = config.load(parser.parse_args(["--namespace", "flag"]), env)
    assert (s.http_port, s.namespace, s.route_cache, s.remoting_port) == (9000, "flag", False, 9876)
    assert s.embedded_redis


@pytest.mark.parametrize(("env", "field"), [
    ({"NSFLEET_HTTP_PORT": "x"}, "NSFLEET_HTTP_PORT"),
    ({"NSFLEET_HTTP_PORT": "70000"}, "http-port"),
    ({"NSFLEET_LOG_FORMAT": "xml"}, "log-format"),
    ({"NSFLEET_NAMESPACE": "a{b}"}, "namespace"),
    ({"NSFLEET_SWEEP_INTERVAL": "0"}, "sweep-interval"),
    ({"NSFLEET_ROUTE_CACHE": "maybe"}, "NSFLEET_ROUTE_CACHE"),
])
def test_bad_settings_name_the_setting(env: dict[str, str], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        config.load(None, env)
    assert err.value.field == field


def test_print_config_masks_secrets(capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NSFLEET_REDIS_URL", "redis://user:secret@redis:6379/0")
    monkeypatch.setenv("NSFLEET_REDIS_PASSWORD", "hunter2")
    assert cli.main(["serve", "--print-config", "--http-port", "1234"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["http_port"] == 1234 and out["redis_password"] == "***"
    assert out["redis_url"] == "redis://***@redis:6379/0"


async def test_sweeper_expires_and_counts(store: RouteStore) -> None:
    metrics = Metrics()
    for i in range(3):
        await store.register_broker(_reg(i, timeout=50 if i == 0 else 60_000))
    await asyncio.sleep(0.2)
    sweeper = Sweeper(store, metrics, interval=1, guard_share=0.5)
    assert await sweeper.sweep_once() == 1
    assert metrics.sweep_removals._value.get() == 1
    assert metrics.brokers_alive._value.get() == 2
    assert sorted((await store.cluster_info()).broker_addr_table) == ["b1", "b2"]
    assert await sweeper.sweep_once() == 0


async def test_sweeper_reports_live_brokers_per_cluster_and_keeps_an_emptied_one(
        store: RouteStore) -> None:
    metrics = Metrics()
    await store.register_broker(_reg(1))
    await store.register_broker(BrokerRegistration(
        "lonely", "10.0.1.1:10911", "x", 0, heartbeat_timeout_millis=50,
        data_version=DataVersion(1, 1), topic_configs=[TopicConfig("X"), TopicConfig("Y")]))
    sweeper = Sweeper(store, metrics, interval=1, guard_share=0)
    await sweeper.sweep_once()
    alive = metrics.cluster_brokers_alive
    assert (alive.labels("c")._value.get(), alive.labels("lonely")._value.get()) == (1, 1)
    assert metrics.store_up._value.get() == 1
    await asyncio.sleep(0.2)
    assert await sweeper.sweep_once() == 1
    # The emptied cluster stays as a 0, which is what the no-live-broker alert looks for.
    assert (alive.labels("c")._value.get(), alive.labels("lonely")._value.get()) == (1, 0)


async def test_mass_expiry_is_held_and_logged(store: RouteStore,
                                              caplog: pytest.LogCaptureFixture) -> None:
    metrics = Metrics()
    for i in range(6):
        await store.register_broker(_reg(i, timeout=50 if i < 4 else 60_000))
    await asyncio.sleep(0.2)
    guarded = Sweeper(store, metrics, interval=1, guard_share=0.5, guard_max_hold=60)
    assert await guarded.sweep_once() == 0
    assert metrics.sweep_held._value.get() == 1
    assert metrics.brokers_alive._value.get() == 2  # the held four are past their deadline
    assert await store.redis.zcard(store.keys.deadlines) == 6
    await asyncio.sleep(0.2)
    bounded = Sweeper(store, metrics, interval=1, guard_share=0.5, guard_max_hold=0.1)
    assert await bounded.sweep_once() == 4  # held, but never past the bound
    assert metrics.sweep_held._value.get() == 2


async def test_sweeper_survives_redis_errors() -> None:
    broken = aioredis.Redis(host="127.0.0.1", port=1)
    metrics = Metrics()
    sweeper = Sweeper(RouteStore(broken, "x"), metrics, interval=1, guard_share=0.5)
    assert await sweeper.sweep_once() == 0
    assert metrics.redis_errors.labels("sweep")._value.get() == 1
    assert metrics.store_up._value.get() == 0
    await broken.aclose()


async def _settled(cache: RouteCache) -> None:
    for _ in range(100):
        if cache.feed.subscribed:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("change feed never subscribed")


async def test_route_cache_serves_hits_and_invalidates_on_change(store: RouteStore) -> None:
    metrics = Metrics()
    cache = RouteCache(store, metrics)
    await cache.start()
    try:
        await _settled(cache)
        await store.register_broker(_reg(1))
        await cache.feed.sync()  # what the NameServer does after a write
        first = await cache.get("T1")
        assert first.read is not None
        assert (await cache.get("T1")) is first
        assert metrics.registry.get_sample_value("nsfleet_route_cache_total",
                                                 {"result": "hit"}) == 1
        await store.wipe_write_perm("b1")
        for _ in range(100):
            entry = await cache.get("T1")
            if entry is not first:
                break
            await asyncio.sleep(0.01)
        assert entry.read is not None and entry.read.route.queue_datas[0].perm == 4
        missing = await cache.get("T9")
        assert missing.read is None
        assert (await cache.get("T9")) is missing  # "no route" is cached too
        await store.register_broker(_reg(9))
        for _ in range(100):
            if (await cache.get("T9")).read is not None:
                break
            await asyncio.sleep(0.01)
        assert (await cache.get("T9")).read is not None
    finally:
        await cache.close()


async def test_route_cache_entry_ends_at_the_first_members_deadline(store: RouteStore) -> None:
    cache = RouteCache(store, Metrics())
    await cache.start()
    try:
        await _settled(cache)
        await store.register_broker(_reg(1, timeout=300))
        assert (await cache.get("T1")).read is not None
        await asyncio.sleep(0.4)
        assert (await cache.get("T1")).read is None  # TTL expiry publishes nothing
    finally:
        await cache.close()


async def test_namesrv_config_is_fleet_wide_and_guarded(store: RouteStore) -> None:
    one, two = NamesrvConfig(store), NamesrvConfig(store, static={"listenPort": "9876"})
    await one.refresh()
    assert not one.flag("orderMessageEnable")
    assert await one.update({"orderMessageEnable": "TRUE", "unknownKey": "x"}) == {
        "orderMessageEnable": "true"}
    await two.refresh()
    assert two.flag("orderMessageEnable")
    for key in ("configStorePath", "kvConfigPath", "configBlackList", "rocketmqHome"):
        with pytest.raises(ConfigBlacklisted):
            await one.update({key: "/tmp/evil"})
    # The blacklist can only be extended out of band (Java: the -c file; here: the P:config hash).
    await store.redis.hset(store.keys.config, "configBlackList", "productEnvName")
    await one.refresh()
    with pytest.raises(ConfigBlacklisted):
        await one.update({"productEnvName": "x"})
    text = two.properties_text()
    lines = text.splitlines()
    assert lines == sorted(lines) and "listenPort=9876" in lines


async def test_namesrv_config_parses_values_as_java(store: RouteStore) -> None:
    """MixAll.properties2Object: Integer.parseInt failing leaves the field as it was,
    Boolean.parseBoolean reads anything but "true" as false; Configuration lists the
    NettyServerConfig keys too."""
    config = NamesrvConfig(store, static={"listenPort": "9876", "bindAddress": "0.0.0.0"})
    await config.refresh()
    applied = await config.update({"waitSecondsForService": "abc", "clusterTest": "yes",
                                   "serverWorkerThreads": "16", "scanNotActiveBrokerInterval":
                                   " 7"})
    assert applied == {"clusterTest": "false", "serverWorkerThreads": "16"}
    props = dict(line.split("=", 1) for line in config.properties_text().splitlines())
    assert (props["waitSecondsForService"], props["clusterTest"]) == ("45", "false")
    assert len(props) == 40 and props["useEpollNativeSelector"] == "false"
    assert props["serverWorkerThreads"] == "16" and props["serverSocketBacklog"] == "1024"


async def test_a_worker_reads_its_own_writes_at_once(store: RouteStore) -> None:
    metrics = Metrics()
    cache = RouteCache(store, metrics)
    config = NamesrvConfig(store)
    ns = NameServer(store, cache, config, metrics)
    await cache.start()
    try:
        await _settled(cache)
        await ns.register_broker(_reg(1))
        for _ in range(20):
            assert (await ns.route("T1")).route.queue_datas[0].perm == 6  # cached
            await ns.wipe_write_perm("b1")
            # no wait: the write's own change was applied
            assert (await ns.route("T1")).route.queue_datas[0].perm == 4
            await ns.add_write_perm("b1")
            assert (await ns.route("T1")).route.queue_datas[0].perm == 6
    finally:
        await cache.close()


async def test_sync_without_its_marker_drops_the_cache(store: RouteStore,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cache = RouteCache(store, Metrics())
    await cache.start()
    try:
        await _settled(cache)
        await store.register_broker(_reg(1))
        await cache.feed.sync()
        await cache.get("T1")
        assert cache._entries
        monkeypatch.setattr("nsfleet.service.change_follower.SYNC_TIMEOUT", 0.05)
        monkeypatch.setattr(cache.feed, "_deliver", lambda change: None)  # the feed stalls
        await cache.feed.sync()
        assert not cache._entries
    finally:
        await cache.close()


class _GatedStore:
    """A RouteStore whose next route read waits at a gate, so a test can deliver a change while
    the read is in flight."""

    def __init__(self, store: RouteStore) -> None:
        self._store = store
        self.reading = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    async def pickup_route(self, topic: str, **kw: object) -> object:
        read = await self._store.pickup_route(topic, **kw)  # type: ignore[arg-type]
        self.reading.set()
        await self.release.wait()
        return read


@pytest.mark.parametrize("change", ["topic", "all"])
async def test_a_change_during_a_fill_is_never_cached_over(store: RouteStore,
                                                           change: str) -> None:
    """The race the cache must be immune to: a read starts, the route changes and the change is
    applied while the read is in flight, then the read returns the old answer. It is served
    once (it is what Redis held when read) but never stored."""
    gated = _GatedStore(store)
    cache = RouteCache(gated, Metrics())  # type: ignore[arg-type]
    await cache.start()
    try:
        await _settled(cache)
        await store.register_broker(_reg(1))
        await cache.feed.sync()
        fill = asyncio.create_task(cache.get("T1"))
        await gated.reading.wait()  # the old route has been read, not yet stored
        await store.wipe_write_perm("b1")
        await cache.feed.sync()  # the invalidation is applied while the fill is in flight
        if change == "all":
            cache._apply(Change(0, all_routes=True))
        gated.release.set()
        old = await fill
        assert old.read is not None and old.read.route.queue_datas[0].perm == 6
        assert cache.peek("T1") is None  # not stored
        gated.reading, gated.release = asyncio.Event(), asyncio.Event()
        gated.release.set()
        new = await cache.get("T1")
        assert new.read is not None and new.read.route.queue_datas[0].perm == 4
        assert cache.peek("T1") is new
    finally:
        await cache.close()


async def test_no_route_is_not_cached_over_a_first_registration(store: RouteStore) -> None:
    """A reader asking just before a topic's first registration must not keep answering
    TOPIC_NOT_EXIST."""
    gated = _GatedStore(store)
    cache = RouteCache(gated, Metrics())  # type: ignore[arg-type]
    await cache.start()
    try:
        await _settled(cache)
        fill = asyncio.create_task(cache.get("T1"))
        await gated.reading.wait()
        await store.register_broker(_reg(1))
        await cache.feed.sync()
        gated.release.set()
        assert (await fill).read is None
        assert cache.peek("T1") is None
        assert (await cache.get("T1")).read is not None
    finally:
        await cache.close()


@pytest.mark.parametrize("others", [0, 500])
async def test_a_change_naming_many_topics_drops_exactly_theirs(store: RouteStore,
                                                                others: int) -> None:
    """A change message names its topics in bulk (RouteCache.invalidate): the routes of those
    topics, with or without orderTopicConf, go, every other stays, a fill in flight for one of
    them stores nothing, and their watchers wake. ``others`` names topics nobody cached beside
    them (a storm's message names hundreds), which takes the other way through the cache."""
    gated = _GatedStore(store)
    gated.release.set()
    cache = RouteCache(gated, Metrics())  # type: ignore[arg-type]
    await cache.start()
    try:
        await _settled(cache)
        for i in range(1, 7):
            await store.register_broker(_reg(i))
        await cache.feed.sync()
        for i in range(1, 7):
            await cache.get(f"T{i}")
            await cache.get(f"T{i}", order_conf=True)
        gated.reading, gated.release = asyncio.Event(), asyncio.Event()
        fill = asyncio.create_task(cache.get("shared"))
        await gated.reading.wait()  # read, not yet stored
        named = ("T2", "T5", "shared", *(f"X{i}" for i in range(others)))
        with cache.watchers.watch(["T5"]) as woken, cache.watchers.watch(["T4"]) as asleep:
            cache._apply(Change(0, topics=named))
            await asyncio.sleep(0)
            assert woken.done() and not asleep.done()
        gated.release.set()
        await fill
        kept = {(f"T{i}", conf) for i in (1, 3, 4, 6) for conf in (False, True)}
        assert {key for key in kept if cache.peek(key[0], order_conf=key[1])} == kept
        for topic in ("T2", "T5", "shared"):
            assert cache.peek(topic) is None and cache.peek(topic, order_conf=True) is None
    finally:
        await cache.close()


async def test_concurrent_misses_share_a_read_unless_the_topic_changed(
        store: RouteStore) -> None:
    gated = _GatedStore(store)
    reads = 0
    original = gated.pickup_route

    async def counting(topic: str, **kw: object) -> object:
        nonlocal reads
        reads += 1
        return await original(topic, **kw)

    gated.pickup_route = counting  # type: ignore[method-assign]
    cache = RouteCache(gated, Metrics())  # type: ignore[arg-type]
    await cache.start()
    try:
        await _settled(cache)
        await store.register_broker(_reg(1))
        await cache.feed.sync()
        first = asyncio.create_task(cache.get("T1"))
        await gated.reading.wait()
        joined = asyncio.create_task(cache.get("T1"))
        await asyncio.sleep(0.01)
        assert reads == 1  # the second miss waits for the first read
        await store.wipe_write_perm("b1")
        await cache.feed.sync()
        after_change = asyncio.create_task(cache.get("T1"))
        await asyncio.sleep(0.01)
        assert reads == 2  # asked after the change: a read of its own
        gated.release.set()
        assert (await first) is (await joined)
        assert (await after_change).read.route.queue_datas[0].perm == 4  # type: ignore[union-attr]
    finally:
        await cache.close()


def test_analytics_finds_the_redis_to_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$NSFLEET_REDIS_URL first, then a running embedded Redis of the default data directory,
    then localhost."""
    from nsfleet.analytics import cli as analytics_cli

    monkeypatch.setattr(analytics_cli, "default_data_dir", lambda: str(tmp_path))
    assert analytics_cli.default_redis_url({}) == analytics_cli.DEFAULT_REDIS_URL
    (tmp_path / "redis.url").write_text("redis://127.0.0.1:4242/0\n")
    assert analytics_cli.default_redis_url({}) == "redis://127.0.0.1:4242/0"
    assert analytics_cli.default_redis_url({"NSFLEET_REDIS_URL": "redis://h:1/0"}) == \
        "redis://h:1/0"


def test_a_java_namesrv_properties_file_sets_worker_defaults(tmp_path: Path) -> None:
    """mqnamesrv -c: listenPort, bindAddress and scanNotActiveBrokerInterval become this
    worker's settings unless a flag or NSFLEET_* variable says otherwise."""
    conf = tmp_path / "namesrv.properties"
    conf.write_text("listenPort=19876\nbindAddress=127.0.0.1\nscanNotActiveBrokerInterval=2000\n"
                    "orderMessageEnable=true\nkvConfigPath=/opt/kv.json\n")
    parser = argparse.ArgumentParser()
    config.add_arguments(parser)
    s = config.load(parser.parse_args(["-c", str(conf)]), {})
    assert (s.remoting_port, s.host, s.sweep_interval) == (19876, "127.0.0.1", 2.0)
    s = config.load(parser.parse_args(["-c", str(conf), "--remoting-port", "9000"]),
                    {"NSFLEET_HOST": "0.0.0.0"})
    assert (s.remoting_port, s.host) == (9000, "0.0.0.0")
    with pytest.raises(ValidationError):
        config.load(parser.parse_args(["-c", str(tmp_path / "missing")]), {})


def test_analytics_without_the_spark_extra_says_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The message keeps "[spark]" (rich would take it for markup)."""
    import sys

    import nsfleet.analytics
    from nsfleet.analytics import cli as analytics_cli

    # As if pyspark were missing: importing the job fails (even when an earlier test loaded it).
    monkeypatch.delattr(nsfleet.analytics, "job", raising=False)
    monkeypatch.setitem(sys.modules, "nsfleet.analytics.job", None)
    parser = argparse.ArgumentParser()
    analytics_cli.add_parser(parser.add_subparsers(dest="command"))
    assert analytics_cli.run(parser.parse_args(["analytics"])) == 1
    out = capsys.readouterr()
    assert "pip install 'nsfleet[spark]'" in (out.out + out.err).replace("\n", " ")
