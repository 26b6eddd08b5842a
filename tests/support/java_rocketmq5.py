"""The real Apache RocketMQ 5.3.3 brokers in controller mode (``enableControllerMode=true``: a
controller elects the master of each broker set and promotes a slave when it fails), for the
controller's acceptance tests; and Java's own controller (the DLedger controller embedded in the
Java NameServer) to check those tests against.

Two shared folders, found like java_rocketmq's (``shared/`` in this repository or in any folder
above it; CI clones beside ``shared/``), or where the environment says:

* ``java-rocketmq5`` (``NSFLEET_JAVA_ROCKETMQ5``): the 5.3.3 build, Debian's jars (deps.sh) and
  ``e2e.sh``, the 5.3.3 producer and push consumer;
* ``java-rocketmq5-controller`` (``NSFLEET_JAVA_ROCKETMQ5_CONTROLLER``): the controller module
  built with debug info, ``broker-ctl.sh`` (a broker on that classpath: the broker's fastjson
  needs it to decode the controller's answers) and ``namesrv-ctl.sh``.

Every JVM runs in a process group of its own and is killed with it; ports are free loopback
ports."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest

from nsfleet.redis_server import free_port
from tests.support.java_rocketmq import JavaProcess, _broker_port, _java_major, _started
from tests.support.remoting_client import RemotingClient, loads_fastjson

REPO = Path(__file__).resolve().parents[2]
BASE_JAR = "rocketmq-5.3.3-built.jar"
CONTROLLER_JAR = "rocketmq-5.3.3-controller.jar"
HESSIAN_JAR = Path("/usr/share/java/hessian.jar")  # Debian's libhessian-java: Java's controller

GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO = 105, 106
CONTROLLER_GET_REPLICA_INFO, CONTROLLER_GET_METADATA_INFO = 1004, 1005
CALL_TIMEOUT = 3.0  # s: one request; a frozen or dead peer must not stall a poll loop

# What every controller-mode broker here runs with (docs/controller.md, "Configuring the
# brokers"); the periods are shortened from Java's defaults so that the tests stay short.
CONTROLLER_MODE = {
    "enableControllerMode": "true",
    "brokerId": "-1",  # the controller assigns ids
    "brokerRole": "SLAVE",  # the controller decides who is master
    "allAckInSyncStateSet": "true",
    # Heartbeat timeout the broker announces in each 904 (BrokerConfig; Java's default 10 s):
    # a SIGSTOPped master is replaced this long after its last heartbeat.
    "controllerHeartBeatTimeoutMills": "4000",
    # GET_REPLICA_INFO poll (5 s): a broker that missed a role change learns it sooner.
    "syncBrokerMetadataPeriod": "2000",
    # The master's SyncStateSet check (5 s): a caught-up slave joins sooner.
    "checkSyncStateSetPeriod": "2000",
    # GET_METADATA_INFO poll (10 s): a broker whose controller died finds another sooner.
    "syncControllerMetadataPeriod": "3000",
}


def _shared(env: str, name: str) -> Path | None:
    if value := os.environ.get(env):
        return Path(value)
    for base in (REPO, *REPO.parents):
        candidate = base / "shared" / name
        if candidate.is_dir():
            return candidate
    return None


def base_dir() -> Path | None:
    """$NSFLEET_JAVA_ROCKETMQ5, else the nearest ``shared/java-rocketmq5`` above this repo."""
    return _shared("NSFLEET_JAVA_ROCKETMQ5", "java-rocketmq5")


def controller_dir() -> Path | None:
    """$NSFLEET_JAVA_ROCKETMQ5_CONTROLLER, else the nearest ``shared/java-rocketmq5-controller``."""
    return _shared("NSFLEET_JAVA_ROCKETMQ5_CONTROLLER", "java-rocketmq5-controller")


@cache
def unavailable() -> str | None:
    """Why controller-mode brokers cannot run here (None when they can)."""
    base, ctl = base_dir(), controller_dir()
    if base is None or not (base / BASE_JAR).is_file():
        return f"{base or 'shared/java-rocketmq5'}: the built RocketMQ 5.3.3 jar not found"
    if ctl is None or not (ctl / CONTROLLER_JAR).is_file():
        return f"{ctl or 'shared/java-rocketmq5-controller'}: {CONTROLLER_JAR} not found"
    major = _java_major()
    if major is None or major < 17:
        return f"Java 17 not found (java -version: {major})"
    try:
        subprocess.run([str(base / "deps.sh"), "--check"], capture_output=True, text=True,
                       timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = exc.stderr.strip() if isinstance(exc, subprocess.CalledProcessError) else exc
        return f"{base}/deps.sh --check failed: {detail}"
    return None


def missing(reason: str) -> NoReturn:
    """Skip where the pieces cannot be had; in CI, where .ci/run installs what deps.sh needs and
    a shared folder is there, fail instead, so a broken install never passes as a skip."""
    if os.environ.get("CI") and (base_dir() is not None or controller_dir() is not None):
        pytest.fail(f"CI: {reason}")
    pytest.skip(reason)


def require() -> tuple[Path, Path]:
    """(java-rocketmq5, java-rocketmq5-controller), or skip/fail as :func:`missing` says."""
    if reason := unavailable():
        missing(reason)
    base, ctl = base_dir(), controller_dir()
    assert base is not None and ctl is not None
    return base, ctl


# --- processes -----------------------------------------------------------------------------------


@dataclass
class ControllerBroker(JavaProcess):
    """A controller-mode broker started by broker-ctl.sh (which execs the JVM)."""

    store: Path = Path()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def kill9(self) -> None:
        """SIGKILL its group and reap it: its connections close at once."""
        self.signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(20)

    def sigstop(self) -> None:
        """Freeze it: connections stay open, heartbeats stop."""
        self.signal(signal.SIGSTOP)

    def sigcont(self) -> None:
        self.signal(signal.SIGCONT)

    def restart(self, timeout: float = 60.0) -> None:
        """Start it again on the same port and store: it keeps its broker id
        (``store/brokerIdentity``). A running one is SIGKILLed first."""
        self.kill9()
        self.start().wait_port(self.port, timeout)

    def point_at(self, controller_addrs: str, timeout: float = 60.0) -> None:
        """Restart it with ``controllerAddr`` changed: its store, id and epoch file kept."""
        self.argv = [f"controllerAddr={controller_addrs}" if a.startswith("controllerAddr=")
                     else a for a in self.argv]
        self.restart(timeout)

    def broker_log(self) -> str:
        path = self.store / "logs" / "broker.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def controller_leader(self) -> str | None:
        """The controller address its requests go to now: the last GET_METADATA_INFO answer it
        took (ReplicasManager logs each one); None before the first."""
        found = re.findall(r"Update controller leader address to (\S+)", self.broker_log())
        return found[-1] if found else None

    def log_tail(self, chars: int = 3000) -> str:
        return self.broker_log()[-chars:]


def controller_broker_process(namesrv_addrs: str, controller_addrs: str, store: Path,
                              **conf: str) -> ControllerBroker:
    """A controller-mode broker (not started): listen port P on a free triple (P-2 is the VIP
    channel, P+1 HA); ``conf`` entries are appended to broker.conf and win."""
    _, ctl = require()
    port = _broker_port()
    store.mkdir(parents=True, exist_ok=True)
    props = {**CONTROLLER_MODE, "controllerAddr": controller_addrs, **conf}
    argv = [str(ctl / "broker-ctl.sh"), namesrv_addrs, str(port), str(store),
            *(f"{k}={v}" for k, v in props.items())]
    log = store.parent / f"{store.name}.log"
    return ControllerBroker(f"broker {store.name}", argv, log, port=port, store=store)


@contextlib.contextmanager
def controller_broker(namesrv_addrs: str, controller_addrs: str, store: Path,
                      **conf: str) -> Iterator[ControllerBroker]:
    """A controller-mode broker listening on its port (not yet elected or registered: poll
    :func:`replica_info` / :func:`route_members`). Afterwards its group is SIGKILLed (nothing to
    keep: the store's data goes too, its logs stay for a post-mortem)."""
    b = _started(lambda: controller_broker_process(namesrv_addrs, controller_addrs, store,
                                                   **conf))
    try:
        yield b
    finally:
        b.kill9()
        shutil.rmtree(store / "store", ignore_errors=True)


@dataclass
class JavaController(JavaProcess):
    """The Java NameServer 5.3.3 with its embedded DLedger controller (namesrv-ctl.sh)."""

    ctl_port: int = 0

    @property
    def ns_addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ctl_addr(self) -> str:
        return f"127.0.0.1:{self.ctl_port}"


@contextlib.contextmanager
def java_controller(work: Path, **conf: str) -> Iterator[JavaController]:
    """Java's NameServer + controller on free ports, its controller the DLedger leader (its one
    peer elects itself ~2 s after start); stopped afterwards. ``conf`` goes to namesrv.conf
    (ControllerConfig / NamesrvConfig fields)."""
    _, ctl = require()
    if not HESSIAN_JAR.is_file():  # the controller's snapshot serializer (README there)
        missing(f"{HESSIAN_JAR} not found (Debian libhessian-java)")
    work.mkdir(parents=True, exist_ok=True)

    def make() -> JavaController:
        ns_port, ctl_port = free_port(), free_port()
        return JavaController("java-controller", [
            str(ctl / "namesrv-ctl.sh"), str(ns_port), str(ctl_port), str(work),
            *(f"{k}={v}" for k, v in conf.items())], work / "namesrv-ctl.sh.log", port=ns_port,
            ctl_port=ctl_port)

    jc = _started(make)
    try:
        jc.wait_port(jc.ctl_port)
        leader, _ = wait_for(lambda: metadata(jc.ctl_addr).get("isLeader") == "true", 60)
        assert leader, f"Java controller not leader in 60 s: {metadata(jc.ctl_addr)}"
        yield jc
    finally:
        jc.stop()


# --- remoting calls ------------------------------------------------------------------------------


async def _call(addr: str, code: int, ext: dict[str, str] | None) -> tuple[int, str | None,
                                                                          dict[str, str], Any]:
    host, port = addr.rsplit(":", 1)
    client = await asyncio.wait_for(RemotingClient.connect(int(port), host), CALL_TIMEOUT)
    try:
        answer = await client.request(code, ext, wait=CALL_TIMEOUT)
    finally:
        await client.close()
    body = loads_fastjson(answer.body) if answer.body else None
    return answer.code, answer.remark, dict(answer.ext_fields or {}), body


def call(addr: str, code: int, ext: dict[str, str] | None = None,
         ) -> tuple[int, str | None, dict[str, str], Any]:
    """One request: (code, remark, extFields, body parsed as fastjson JSON). A connection that
    fails or an answer that does not come is code -1 with the error as remark."""
    try:
        return asyncio.run(_call(addr, code, ext))
    except (OSError, TimeoutError, ConnectionError, ValueError) as exc:
        return -1, repr(exc), {}, None


def _int(value: str | None) -> int | None:
    return None if value in (None, "") else int(value)


@dataclass(frozen=True)
class ReplicaInfo:
    """CONTROLLER_GET_REPLICA_INFO (1004) for one broker set: the header's master, the body's
    SyncStateSet; ``code``/``remark`` say why the rest is empty."""

    code: int
    remark: str | None = None
    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int | None = None


def replica_info(ctl_addr: str, broker_name: str) -> ReplicaInfo:
    code, remark, ext, body = call(ctl_addr, CONTROLLER_GET_REPLICA_INFO,
                                   {"brokerName": broker_name})
    if code != 0:
        return ReplicaInfo(code, remark)
    body = body or {}
    return ReplicaInfo(code, remark, _int(ext.get("masterBrokerId")),
                       ext.get("masterAddress") or None, _int(ext.get("masterEpoch")),
                       frozenset(body.get("syncStateSet") or ()), body.get("syncStateSetEpoch"))


def metadata(ctl_addr: str) -> dict[str, Any]:
    """CONTROLLER_GET_METADATA_INFO (1005): its extFields (group, controllerLeaderId,
    controllerLeaderAddress, isLeader, peers) with ``code`` and ``remark``."""
    code, remark, ext, _ = call(ctl_addr, CONTROLLER_GET_METADATA_INFO)
    return {"code": code, "remark": remark, **ext}


def route_members(ns_addr: str, broker_name: str) -> dict[int, str]:
    """{brokerId: addr} of ``broker_name`` in ``ns_addr``'s cluster info (106); {} when it is not
    there or the name server does not answer."""
    code, _, _, body = call(ns_addr, GET_BROKER_CLUSTER_INFO)
    if code != 0 or not body:
        return {}
    data = (body.get("brokerAddrTable") or {}).get(broker_name) or {}
    return {int(k): v for k, v in (data.get("brokerAddrs") or {}).items()}


T = TypeVar("T")


def wait_for(pred: Callable[[], T], timeout: float, interval: float = 0.2) -> tuple[T | None,
                                                                                     float]:
    """Poll ``pred`` until it returns something truthy: (that value, seconds it took), or
    (None, seconds waited) when ``timeout`` passes first."""
    t0 = time.monotonic()
    while True:
        value = pred()
        elapsed = time.monotonic() - t0
        if value:
            return value, elapsed
        if elapsed > timeout:
            return None, elapsed
        time.sleep(interval)


# --- messages ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    """What ``e2e.sh`` reported: messages sent and received (all of them when ``ok``)."""

    sent: int
    received: int
    ok: bool
    seconds: float
    output: str


RESULT = re.compile(r"RESULT (PASS|FAIL) sent=(\d+) received=(\d+)")


def messages(namesrv: str, topic: str | None, n: int, timeout_s: int = 60) -> Delivery:
    """e2e.sh (the 5.3.3 client, given only ``namesrv``, 'a;b'): create ``topic`` on every master
    if no route has it (None: a fresh one), send ``n`` messages, receive them."""
    base, _ = require()
    topic = topic or f"CtlT{uuid.uuid4().hex[:10]}"
    t0 = time.monotonic()
    # A group of its own: the client's JVM is e2e.sh's child, and a hung run is killed whole.
    proc = subprocess.Popen([str(base / "e2e.sh"), namesrv, topic, str(n), str(timeout_s)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s + 60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        out += "\n(e2e.sh killed: no answer in time)"
    seconds = time.monotonic() - t0
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # anything the client left in its group
    found = RESULT.search(out)
    if found is None:
        return Delivery(0, 0, False, seconds, out[-3000:])
    sent, received = int(found[2]), int(found[3])
    return Delivery(sent, received, found[1] == "PASS" and proc.returncode == 0, seconds,
                    out[-3000:])


# --- messages through failovers ---------------------------------------------------------------

LOAD_SOURCE = REPO / "tests" / "java" / "FailoverLoad.java"
LOAD_RESULT = re.compile(r"RESULT acked=(\d+) failed=(\d+) received=(\d+) lost=(\d+) "
                         r"longest_gap_ms=(\d+) lost_ids=(\[.*\])")


@dataclass(frozen=True)
class LoadProgress:
    """FailoverLoad's counts so far (its progress file)."""

    acked: int = 0
    failed: int = 0
    received: int = 0
    longest_gap_ms: int = 0


@dataclass(frozen=True)
class LoadResult:
    """FailoverLoad's last line: ``lost`` acknowledged messages never received."""

    acked: int
    failed: int
    received: int
    lost: int
    longest_gap_ms: int
    lost_ids: str
    output: str


class FailoverLoad:
    """tests/java/FailoverLoad.java running: one message every 10 ms until :meth:`finish`."""

    def __init__(self, proc: subprocess.Popen[bytes], work: Path) -> None:
        self.proc, self.work = proc, work

    def printed(self) -> str:
        """Its output so far (a file: a pipe nobody reads would stall its logging)."""
        return (self.work / "output.log").read_text(errors="replace")

    def progress(self) -> LoadProgress:
        with contextlib.suppress(FileNotFoundError, ValueError):
            return LoadProgress(*map(int, (self.work / "progress").read_text().split()))
        return LoadProgress()

    def abort(self) -> str:
        """Kill it: the end of what it printed (its failed sends), for a failure message."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        out = self.printed()
        return "\n".join(line for line in out.splitlines() if not line.startswith("\tat "))[-4000:]

    def acked_past(self, count: int, timeout: float) -> LoadProgress | None:
        """Wait until more than ``count`` messages are acknowledged; None if not in time or the
        client is gone."""
        found, _ = wait_for(lambda: self.proc.poll() is None
                            and self.progress().acked > count and self.progress(), timeout)
        return found or None

    def finish(self, timeout: float = 150.0) -> LoadResult:
        (self.work / "stop").touch()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        out = self.printed()
        found = LOAD_RESULT.search(out)
        assert found, f"FailoverLoad printed no RESULT:\n{out[-3000:]}"
        return LoadResult(*map(int, found.groups()[:5]), found[6], out[-3000:])


@cache
def _java_env() -> tuple[str, str]:
    """(the 5.3.3 client's classpath, its JVM options), as common.sh builds them."""
    base, _ = require()
    out = subprocess.run(["bash", "-c", '. "$1/common.sh" && printf "%s\\n%s" "$CP" "$JAVA_OPENS"',
                          "env", str(base)], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    cp, opens = out.split("\n", 1)
    return cp, opens


@contextlib.contextmanager
def failover_load(namesrv: str, topic: str, work: Path) -> Iterator[FailoverLoad]:
    """Compile and start FailoverLoad against ``namesrv`` (';'-separated) on ``topic`` (which
    must exist: :func:`messages` creates it); its group is killed afterwards."""
    cp, opens = _java_env()
    classes = work / "classes"
    done = subprocess.run(["javac", "-nowarn", "-cp", cp, "-d", str(classes), str(LOAD_SOURCE)],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    base, _ = require()
    argv = ["java", "-Xmx256m", *opens.split(), f"-Duser.home={logs}",
            f"-Drocketmq.client.logRoot={logs}", "-Drocketmq.client.logLevel=WARN",
            f"-Dlogback.configurationFile={base / 'conf' / 'logback_tool.xml'}",
            "-cp", f"{classes}:{cp}", "FailoverLoad", namesrv, topic, str(work)]
    with (work / "output.log").open("w") as output:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=output,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield FailoverLoad(proc, work)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
