"""nsfleet serve --processes: the supervisor's restarts, crash-loop exit and signal forwarding
(with stand-in children), the children's environment, and the merged /metrics."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from nsfleet import supervisor
from nsfleet.config import Settings, load
from nsfleet.domain.errors import ValidationError
from nsfleet.process_group import ProcessGroup, merge


def settings(**kw: object) -> Settings:
    base: dict[str, object] = {"redis_url": "redis://127.0.0.1:1/0", "http_port": 18080,
                               "remoting_port": 19876, "drain_timeout": 2.0}
    return Settings(**{**base, **kw})  # type: ignore[arg-type]


def test_processes_setting() -> None:
    assert settings().process_count() == 1
    assert settings(processes="4").validate().process_count() == 4
    assert settings(processes="auto").validate().process_count() >= 1
    for bad in ("0", "many", "-2"):
        with pytest.raises(ValidationError):
            settings(processes=bad).validate()
    with pytest.raises(ValidationError, match="fixed port"):
        settings(processes="2", http_port=0).validate()
    assert load(None, {"NSFLEET_PROCESSES": "3"}).processes == "3"


def test_children_get_every_setting_and_one_process_each(tmp_path: Path) -> None:
    env = supervisor.child_environ(settings(processes="3", acl_anonymous_reads=True,
                                            namespace="ns1"), "redis://127.0.0.1:5/0", 2, 3,
                                   tmp_path, base={"PATH": "/bin", "NSFLEET_STALE": "x"})
    assert env["PATH"] == "/bin" and "NSFLEET_STALE" not in env
    assert env["NSFLEET_PROCESSES"] == "1" and env["NSFLEET_NAMESPACE"] == "ns1"
    assert env["NSFLEET_ACL_ANONYMOUS_READS"] == "true"
    assert env["NSFLEET_REDIS_URL"] == "redis://127.0.0.1:5/0"
    child = load(None, env)  # what the child reads back
    assert child.process_count() == 1 and child.acl_anonymous_reads and child.http_port == 18080
    group = ProcessGroup.from_environ(env)
    assert group is not None and (group.index, group.count, group.directory) == (2, 3, tmp_path)
    assert ProcessGroup.from_environ({}) is None


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "BACKOFF_FIRST", 0.05)
    monkeypatch.setattr(supervisor, "POLL", 0.01)


def test_children_that_keep_crashing_make_it_exit_1(quick: None) -> None:
    command = [sys.executable, "-c", "import sys; sys.exit(3)"]
    started = time.monotonic()
    assert supervisor.Supervisor(settings(), 2, command).run() == 1
    assert time.monotonic() - started < 20


CHILD = """
import os, signal, sys, time
out = sys.argv[1]
def stop(*_):
    open(os.path.join(out, f"stopped-{os.environ['NSFLEET_PROCESS_INDEX']}-{os.getpid()}"), "w")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
open(os.path.join(out, f"started-{os.environ['NSFLEET_PROCESS_INDEX']}-{os.getpid()}"), "w")
while True:
    time.sleep(0.05)
"""


def _files(path: Path, prefix: str) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.name.startswith(prefix))


def test_a_killed_child_is_restarted_and_sigterm_reaches_every_child(
        quick: None, tmp_path: Path) -> None:
    command = [sys.executable, "-c", CHILD, str(tmp_path)]
    sup = supervisor.Supervisor(settings(), 2, command)
    killed: list[int] = []

    def drive() -> None:
        deadline = time.monotonic() + 20
        while len(_files(tmp_path, "started-")) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        victim = next(n for n in _files(tmp_path, "started-") if n.startswith("started-1-"))
        killed.append(int(victim.rsplit("-", 1)[1]))
        os.kill(killed[0], signal.SIGKILL)
        while len(_files(tmp_path, "started-1-")) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)  # to the supervisor (this process)

    thread = threading.Thread(target=drive)
    thread.start()
    code = sup.run()
    thread.join()
    assert code == 0
    started = _files(tmp_path, "started-")
    assert len(started) == 3  # slot 0 once, slot 1 twice (the restart)
    assert len(_files(tmp_path, "started-1-")) == 2
    stopped = _files(tmp_path, "stopped-")
    assert {n.split("-")[1] for n in stopped} == {"0", "1"}  # both drained on SIGTERM
    assert f"stopped-1-{killed[0]}" not in stopped


def _registry(n: int) -> bytes:
    r = CollectorRegistry()
    Counter("reqs", "requests", ["code", "route"], registry=r).labels("105", "a} b").inc(n)
    Histogram("lat", "latency", registry=r, buckets=(0.1, 1.0)).observe(0.5 * n)
    Gauge("conns", "connections", registry=r).set(n)
    return generate_latest(r)


def test_metrics_of_every_process_merged_with_a_process_label() -> None:
    text = merge({0: _registry(1), 1: _registry(2), 2: None}).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    up = {s.labels["process"]: s.value for s in families["nsfleet_process_up"].samples}
    assert up == {"0": 1.0, "1": 1.0, "2": 0.0}
    reqs = {s.labels["process"]: s.value for s in families["reqs"].samples
            if s.name == "reqs_total"}
    assert reqs == {"0": 1.0, "1": 2.0}
    assert {s.labels["route"] for s in families["reqs"].samples} == {"a} b"}
    assert len([s for s in families["lat"].samples if s.name == "lat_bucket"]) == 6
    assert text.count("# TYPE conns gauge") == 1
