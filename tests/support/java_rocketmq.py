"""The real Apache RocketMQ 4.9.8 (Java NameServer, broker, client) from the shared
``java-rocketmq`` folder, for the acceptance tests and the benchmarks.

The folder sits beside the clone (CI: ``../shared/java-rocketmq``), in the clone (``shared/``), or
where ``NSFLEET_JAVA_ROCKETMQ`` says; it is found by walking up from this repository, never by the
clone folder's name. Every process started here runs in its own process group and is stopped with
its group (a broker's store goes with it); ports are free loopback ports."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest

from nsfleet.redis_server import free_port
from tests.support.remoting_client import RemotingClient, loads_fastjson

REPO = Path(__file__).resolve().parents[2]
JAR_NAME = "rocketmq-4.9.8-built.jar"
TOOL_SOURCE = REPO / "tests" / "java" / "NsAdmin.java"
GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO = 105, 106


def shared_dir() -> Path | None:
    """The java-rocketmq folder: $NSFLEET_JAVA_ROCKETMQ, else ``shared/java-rocketmq`` in this
    repository or in any folder above it (CI clones beside ``shared/``)."""
    if env := os.environ.get("NSFLEET_JAVA_ROCKETMQ"):
        return Path(env)
    for base in (REPO, *REPO.parents):
        candidate = base / "shared" / "java-rocketmq"
        if (candidate / JAR_NAME).is_file():
            return candidate
    return None


@cache
def classpath() -> str:
    """The jar plus Debian's jars (deps.sh --check); raises when a package is missing."""
    home = shared_dir()
    assert home is not None
    deps = subprocess.run([str(home / "deps.sh"), "--check"], capture_output=True, text=True,
                          timeout=60, check=True)
    return f"{home / JAR_NAME}:{deps.stdout.strip()}"


def _java_major() -> int | None:
    if shutil.which("java") is None:
        return None
    out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30).stderr
    try:
        version = out.split('"')[1]
    except IndexError:
        return None
    return int(version.split(".")[0])


@cache
def unavailable() -> str | None:
    """Why the Java pieces cannot run here (None when they can)."""
    home = shared_dir()
    if home is None or not (home / JAR_NAME).is_file():
        return f"{home or 'shared/java-rocketmq'}: the built RocketMQ 4.9.8 jar not found"
    major = _java_major()
    if major is None or major < 17:
        return f"Java 17 not found (java -version: {major})"
    try:
        classpath()
    except (OSError, subprocess.SubprocessError) as exc:
        detail = exc.stderr.strip() if isinstance(exc, subprocess.CalledProcessError) else exc
        return f"{home}/deps.sh --check failed: {detail}"
    return None


def missing(reason: str) -> NoReturn:
    """Skip where Java or the jar cannot be had; in CI, where .ci/run installs what deps.sh
    needs and the jar is there, fail instead, so a broken install never passes as a skip."""
    if os.environ.get("CI") and shared_dir() is not None:
        pytest.fail(f"CI: {reason}")
    pytest.skip(reason)


def require() -> Path:
    if reason := unavailable():
        missing(reason)
    home = shared_dir()
    assert home is not None
    return home


# --- processes -----------------------------------------------------------------------------------


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _broker_port() -> int:
    """A port P with P-2 (the broker's VIP channel) and P+1 (HA) free as well."""
    for _ in range(50):
        port = free_port()
        if port < 1026:
            continue
        try:
            with contextlib.ExitStack() as stack:
                for p in (port - 2, port + 1):
                    s = stack.enter_context(socket.socket())
                    s.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue
    raise RuntimeError("no free broker port triple")


@dataclass
class JavaProcess:
    """One JVM started by a shared script (which execs it: the PID is the JVM's), in a process
    group of its own."""

    name: str
    argv: list[str]
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0  # what it listens on once started
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> JavaProcess:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, **self.env}, start_new_session=True)
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, sig)

    def wait_port(self, port: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not _accepts(port):
            if not self.alive():
                raise RuntimeError(f"{self.name} exited: {self.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} not listening on {port}: {self.tail()}")
            time.sleep(0.1)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (a broker unregisters), SIGKILL if it lingers; also a stopped one."""
        if self.process is None:
            return
        if self.alive():
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.process.wait(timeout)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)  # anything the JVM left in its group

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


@dataclass
class NameServer(JavaProcess):
    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass
class Broker(JavaProcess):
    store: Path = Path()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


P = TypeVar("P", bound=JavaProcess)
START_ATTEMPTS = 3  # a JVM binds a second or more after its port was picked: another may take it


def _started(make: Callable[[], P]) -> P:
    """Start what ``make`` builds (fresh ports each time), again when it exits before listening
    (its port was taken meanwhile)."""
    for attempt in range(START_ATTEMPTS):
        proc = make()
        try:
            proc.start().wait_port(proc.port)
            return proc
        except RuntimeError:
            proc.stop()
            if attempt == START_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def namesrv(work: Path) -> Iterator[NameServer]:
    """The Java NameServer on a free port, ready (listening); stopped afterwards."""
    home = require()
    work.mkdir(parents=True, exist_ok=True)

    def make() -> NameServer:
        port = free_port()
        return NameServer("java-namesrv", [str(home / "namesrv.sh"), str(port), str(work)],
                          work / "namesrv.sh.log", port=port)

    ns = _started(make)
    try:
        yield ns
    finally:
        ns.stop()


def broker_process(namesrv_addrs: str | None, store: Path, *props: str,
                   env: dict[str, str] | None = None) -> Broker:
    """A broker (not started) for ``namesrv_addrs`` ('a;b'). None: no namesrvAddr line at all,
    so that ``fetchNamesrvAddrByAddressServer=true`` applies (broker.sh always writes one, so
    this case runs BrokerStartup with common.sh's classpath and options on a conf of its own)."""
    home = require()
    port = _broker_port()
    store.mkdir(parents=True, exist_ok=True)
    log = store.parent / f"{store.name}.log"
    if namesrv_addrs is not None:
        argv = [str(home / "broker.sh"), namesrv_addrs, str(port), str(store), *props]
    else:
        (store / "home" / "conf").mkdir(parents=True, exist_ok=True)
        (store / "logs").mkdir(exist_ok=True)
        shutil.copy(home / "conf" / "logback_broker.xml", store / "home" / "conf")
        conf = {"brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "0",
                "brokerRole": "ASYNC_MASTER", "flushDiskType": "ASYNC_FLUSH",
                "listenPort": str(port), "haListenPort": str(port + 1),
                "brokerIP1": "127.0.0.1", "storePathRootDir": f"{store}/store",
                "storePathCommitLog": f"{store}/store/commitlog",
                "autoCreateTopicEnable": "true", "mappedFileSizeCommitLog": "67108864",
                "mappedFileSizeConsumeQueue": "300000", "rocketmqHome": f"{store}/home"}
        conf.update(p.split("=", 1) for p in props)
        (store / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        script = ('. "$1/common.sh" && cd "$2" && exec java -server -Xms512m -Xmx512m '
                  '-XX:+UseG1GC -XX:MaxDirectMemorySize=512m $JAVA_OPENS -Duser.home="$2" '
                  '-Drocketmq.client.logRoot="$2/logs" -cp "$CP" '
                  'org.apache.rocketmq.broker.BrokerStartup -c "$2/broker.conf"')
        argv = ["bash", "-c", script, "broker", str(home), str(store)]
    return Broker(f"broker {store.name}", argv, log, dict(env or {}), port=port, store=store)


@contextlib.contextmanager
def broker(namesrv_addrs: str | None, store: Path, *props: str,
           env: dict[str, str] | None = None) -> Iterator[Broker]:
    """A running broker (listening on its port); stopped and its store removed afterwards."""
    b = _started(lambda: broker_process(namesrv_addrs, store, *props, env=env))
    try:
        yield b
    finally:
        b.stop()
        shutil.rmtree(store, ignore_errors=True)


# --- what the Java client sees -------------------------------------------------------------------


def _java(home: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, cwd=home)


def e2e(namesrv_addrs: str, topic: str, n: int,
        timeout_s: int = 90) -> subprocess.CompletedProcess[str]:
    """e2e.sh: produce and consume ``n`` messages with the 4.9.8 client (exit 0: all arrived)."""
    home = require()
    return _java(home, home / "e2e.sh", namesrv_addrs, topic, str(n), str(timeout_s),
                 timeout=timeout_s + 60)


def e2e_popen(namesrv_addrs: str, topic: str, n: int,
              timeout_s: int = 90) -> subprocess.Popen[str]:
    home = require()
    return subprocess.Popen([str(home / "e2e.sh"), namesrv_addrs, topic, str(n), str(timeout_s)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def route_as_decoded(namesrv_addr: str, topic: str) -> dict[str, Any]:
    """``e2e.sh --route``: ROUTE / CLUSTER / TOPICS as the 4.9.8 client decodes them."""
    home = require()
    out = _java(home, home / "e2e.sh", "--route", namesrv_addr, topic, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    answers = {}
    for line in out.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key in ("ROUTE", "CLUSTER", "TOPICS"):
            answers[key] = loads_fastjson(value)
    return answers


def compile_tool(out_dir: Path) -> Path:
    """javac tests/java/NsAdmin.java against the jar into ``out_dir`` (never committed)."""
    require()
    out_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["javac", "-nowarn", "-cp", classpath(), "-d", str(out_dir),
                           str(TOOL_SOURCE)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return out_dir


def admin(tool_dir: Path, namesrv_addrs: list[str], *ops: str) -> dict[str, dict[str, Any]]:
    """Run NsAdmin's ``ops`` against each name server on its own, in one JVM: {addr: {op:
    {"ok": value} | {"error": code, "message": ...}}}."""
    home = require()
    with tempfile.TemporaryDirectory(prefix="nsadmin-") as logs:
        script = ('. "$1/common.sh" && shift && exec java -Xmx256m $JAVA_OPENS '
                  f'-Duser.home="{logs}" -Drocketmq.client.logRoot="{logs}" '
                  '-Drocketmq.client.logLevel=WARN '
                  f'-Dlogback.configurationFile="{home}/conf/logback_tool.xml" '
                  f'-cp "{tool_dir}:$CP" NsAdmin "$@"')
        out = subprocess.run(["bash", "-c", script, "nsadmin", str(home),
                              ",".join(namesrv_addrs), *ops],
                             capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    answers: dict[str, dict[str, Any]] = {addr: {} for addr in namesrv_addrs}
    for line in out.stdout.splitlines():
        parts = line.split("\t", 2)
        if len(parts) == 3 and parts[0] in answers:
            answers[parts[0]][parts[1]] = loads_fastjson(parts[2])
    return answers


async def _cluster_info(addr: str) -> dict[str, Any]:
    host, port = addr.rsplit(":", 1)
    client = await RemotingClient.connect(int(port), host)
    try:
        answer = await client.request(GET_BROKER_CLUSTER_INFO)
    finally:
        client.writer.close()
    return loads_fastjson(answer.body) if answer.body else {}


def broker_addrs(namesrv_addr: str) -> dict[str, dict[str, str]]:
    """{brokerName: {brokerId: addr}} as ``namesrv_addr`` answers 106 (over the wire)."""
    info = asyncio.run(_cluster_info(namesrv_addr))
    return {name: dict(data.get("brokerAddrs", {}))
            for name, data in (info.get("brokerAddrTable") or {}).items()}


def wait_registered(namesrv_addr: str, broker_name: str, addr: str, broker_id: str = "0",
                    timeout: float = 60.0) -> float:
    """Wait until ``namesrv_addr`` lists ``addr`` as ``broker_name``'s ``broker_id``; the
    seconds it took."""
    t0 = time.monotonic()
    while broker_addrs(namesrv_addr).get(broker_name, {}).get(broker_id) != addr:
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{addr} never registered with {namesrv_addr}")
        time.sleep(0.1)
    return time.monotonic() - t0


async def _route_code(addr: str, topic: str) -> int:
    host, port = addr.rsplit(":", 1)
    client = await RemotingClient.connect(int(port), host)
    try:
        return (await client.request(GET_ROUTEINFO_BY_TOPIC, {"topic": topic})).code
    finally:
        client.writer.close()


def route_code(namesrv_addr: str, topic: str) -> int:
    """The response code of ``namesrv_addr``'s 105 for ``topic`` (0: it has a route)."""
    return asyncio.run(_route_code(namesrv_addr, topic))
