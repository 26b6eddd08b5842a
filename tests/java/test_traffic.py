"""Issue 30: messages through the fleet with the 4.9.8 Java producer and push consumer
(e2e.sh), one worker killed mid-run; topic and KV administration with the Java client's admin
calls, each answered by the fleet as the Java NameServer answers it."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from nsfleet.redis_server import RedisServer
from tests.java.answers import by_ns
from tests.java.conftest import NAMESPACE, fleet_env, remoting
from tests.support import java_rocketmq as jr
from tests.support.fleet import wait_until
from tests.support.workers import WorkerProcess

MESSAGES = 1000


def test_messages_flow_while_a_worker_dies(broker_a: jr.Broker, fleet: list[WorkerProcess],
                                           redis_server: RedisServer, tmp_path: Path) -> None:
    """The client's list names a third worker twice and one of the pair once (a Java client
    starts at a random entry and moves to the next when one fails); the third is SIGKILLed once
    the tool's admin has read the route, as its producer and consumer start: every message
    arrives, their routes come from the survivor."""
    doomed = WorkerProcess(fleet_env(redis_server, NAMESPACE), tmp_path / "doomed.log").start()
    try:
        addrs = f"{remoting(doomed)};{remoting(doomed)};{remoting(fleet[0])}"
        run = jr.e2e_popen(addrs, "E2EFailover", MESSAGES)
        assert run.stdout is not None
        lines = []
        for line in run.stdout:
            lines.append(line)
            if line.startswith("route "):  # the admin read its route; the clients start now
                doomed.stop(signal.SIGKILL)
                break
        lines.extend(run.stdout)
        assert run.wait(180) == 0, "".join(lines)
    finally:
        if doomed.process is not None and doomed.process.poll() is None:
            doomed.stop(signal.SIGKILL)
    assert doomed.process is not None and doomed.process.returncode == -signal.SIGKILL
    result = next(line for line in lines if line.startswith("RESULT"))
    assert f"sent={MESSAGES} received={MESSAGES}" in result


def test_messages_flow_through_both_workers(broker_a: jr.Broker, every_ns: list[str]) -> None:
    done = jr.e2e(";".join(every_ns[:-1]), "E2EFleet", MESSAGES)
    assert done.returncode == 0, done.stdout + done.stderr


def _route_everywhere(every_ns: list[str], topic: str) -> bool:
    return all(jr.route_code(ns, topic) == 0 for ns in every_ns)


def test_topic_administration_as_java(broker_a: jr.Broker, every_ns: list[str],
                                      nsadmin: Path) -> None:
    """createAndUpdateTopicConfig goes to the broker, which registers the change with every name
    server; wipeWritePermOfBroker (205) and addWritePermOfBroker (327) go to each name server on
    its own (each sequence ends as it began, so the next one starts from the same state)."""
    create = f"createtopic|{broker_a.addr}|AdminTopic|4|4|6"
    assert jr.admin(nsadmin, [every_ns[-1]], create)[every_ns[-1]][create] == {"ok": "done"}
    wait_until(lambda: _route_everywhere(every_ns, "AdminTopic"), timeout=30, interval=0.2)
    ops = ("route|AdminTopic", "wipe|broker-a", "route|AdminTopic", "wipe|no-such-broker",
           "addperm|broker-a", "route|AdminTopic", "addperm|no-such-broker")
    answers = by_ns(jr.admin(nsadmin, every_ns, *ops))
    java = answers[every_ns[-1]]
    assert java["route|AdminTopic"]["queueDatas"][0]["perm"] == 6
    assert java["wipe|broker-a"] > 0 and java["addperm|broker-a"] == java["wipe|broker-a"]
    for worker in every_ns[:-1]:
        assert answers[worker] == java, worker


def test_kv_administration_as_java(every_ns: list[str], nsadmin: Path) -> None:
    ns = f"KV_{time.monotonic_ns()}"
    ops = (f"kvget|{ns}|k1", f"kvlist|{ns}", f"kvput|{ns}|k1|v1", f"kvput|{ns}|k2|v 2",
           f"kvget|{ns}|k1", f"kvlist|{ns}", f"kvput|{ns}|k1|v1b", f"kvget|{ns}|k1",
           f"kvdel|{ns}|k1", f"kvget|{ns}|k1", f"kvdel|{ns}|k1", f"kvdel|{ns}|k2",
           f"kvlist|{ns}")
    answers = by_ns(jr.admin(nsadmin, every_ns, *ops))
    java = answers[every_ns[-1]]
    assert java[f"kvget|{ns}|k1"] == ("error", 22)
    assert java[f"kvput|{ns}|k1|v1"] == "done"
    for worker in every_ns[:-1]:
        assert answers[worker] == java, worker
