"""TLS on the remoting port, against real ``nsfleet serve`` processes (uvloop): the three modes
(Java's TlsModeHandler: 0x16 first means TLS; enforcing closes plaintext; disabled refuses TLS),
client certificates, a PROXY header before TLS, certificate reload, handshake failures that
leave other connections alone, bad files at start, and ``nsfleet admin -n --tls``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from nsfleet.redis_server import RedisServer, free_port
from tests.support.certs import Authority, Issued, serial_of
from tests.support.fleet import async_wait_until
from tests.support.remoting_client import SUCCESS, Broker, RemotingClient, TopicConf
from tests.support.workers import WorkerProcess

pytestmark = pytest.mark.redis

GET_ROUTEINFO_BY_TOPIC = 105
GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
HAPROXY = Path("/usr/sbin/haproxy")
BROKER = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912",
                [TopicConf("T1", 4, 4), TopicConf("T2", 4, 4)])


class Pki:
    def __init__(self, directory: Path) -> None:
        self.ca = Authority(directory, "fleet")
        self.server = self.ca.issue("server", server=True)
        self.client = self.ca.issue("client", server=False)
        self.stranger = Authority(directory, "stranger").issue("stranger", server=False)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@contextlib.contextmanager
def worker(redis_server: RedisServer, tmp_path: Path, **tls: str) -> Iterator[WorkerProcess]:
    env = {"NSFLEET_REDIS_URL": redis_server.url,
           "NSFLEET_NAMESPACE": f"tls-{uuid.uuid4().hex[:8]}",
           **{f"NSFLEET_TLS_{k.upper()}": v for k, v in tls.items()}}
    proc = WorkerProcess(env, tmp_path / f"worker-{uuid.uuid4().hex[:6]}.log").start()
    try:
        yield proc
    finally:
        assert proc.stop() == 0


def server_files(pki: Pki, **extra: str) -> dict[str, str]:
    return {"cert_file": str(pki.server.cert_file), "key_file": str(pki.server.key_file),
            **extra}


def client_context(pki: Pki, cert: Issued | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca.cert_file))
    if cert is not None:
        ctx.load_cert_chain(str(cert.cert_file), str(cert.key_file))
    return ctx


async def tls_connect(port: int, ctx: ssl.SSLContext, prefix: bytes = b"") -> RemotingClient:
    if not prefix:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx,
                                                       server_hostname="127.0.0.1")
        return RemotingClient(reader, writer)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(prefix)
    await writer.drain()
    await writer.start_tls(ctx, server_hostname="127.0.0.1")
    return RemotingClient(reader, writer)


@contextlib.asynccontextmanager
async def connected(client: RemotingClient) -> AsyncIterator[RemotingClient]:
    try:
        yield client
    finally:
        await client.close()


async def route_brokers(client: RemotingClient, topic: str = "T1") -> list[str]:
    response = await client.request(GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    assert response.code == SUCCESS, response.remark
    return [b["brokerName"] for b in response.body_json()["brokerDatas"]]


async def register_and_read(client: RemotingClient) -> None:
    response = await client.call(BROKER.register_5x())
    assert response.code == SUCCESS, response.remark
    assert await route_brokers(client) == ["broker-a"]


async def refused(port: int, ctx: ssl.SSLContext) -> bool:
    """True when the handshake fails or the connection closes before an answer (with TLS 1.3
    a client learns of a rejected certificate only at its first read)."""
    try:
        client = await tls_connect(port, ctx)
    except (ssl.SSLError, ConnectionError):
        return True
    async with connected(client):
        try:
            await client.request(GET_ROUTEINFO_BY_TOPIC, {"topic": "T1"})
        except ConnectionError:
            return True
    return False


def metric(proc: WorkerProcess, name: str, label: str) -> float:
    with urllib.request.urlopen(f"{proc.url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    found = re.search(rf'^{name}{{[a-z]+="{label}"}} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def test_permissive_serves_tls_and_plaintext_on_one_port(
        redis_server: RedisServer, tmp_path: Path, pki: Pki) -> None:
    with worker(redis_server, tmp_path, mode="permissive", **server_files(pki)) as proc:
        async with connected(await tls_connect(proc.remoting_port, client_context(pki))) as tls:
            await register_and_read(tls)
            async with connected(await RemotingClient.connect(proc.remoting_port)) as plain:
                assert await route_brokers(plain) == ["broker-a"]
            # Large answers cross several TLS records.
            big = Broker("c1", "10.0.0.2:10911", "broker-b", 0, None,
                         [TopicConf(f"Big{i:04d}", 8, 8) for i in range(2000)])
            assert (await tls.call(big.register_5x())).code == SUCCESS
            assert await route_brokers(tls, "Big1999") == ["broker-b"]
            every = await tls.request(GET_ALL_TOPIC_LIST_FROM_NAMESERVER)  # a large answer
            assert every.code == SUCCESS and len(every.body or b"") > 20_000
            assert "Big1999" in every.body_json()["topicList"]
        assert metric(proc, "nsfleet_remoting_connections_by_transport_total", "tls") == 1
        assert metric(proc, "nsfleet_remoting_connections_by_transport_total", "plaintext") == 1


async def test_enforcing_closes_plaintext_connections(
        redis_server: RedisServer, tmp_path: Path, pki: Pki) -> None:
    with worker(redis_server, tmp_path, mode="enforcing", **server_files(pki)) as proc:
        async with connected(await tls_connect(proc.remoting_port, client_context(pki))) as tls:
            await register_and_read(tls)
            async with connected(await RemotingClient.connect(proc.remoting_port)) as plain:
                with pytest.raises(ConnectionError):
                    await plain.request(GET_ROUTEINFO_BY_TOPIC, {"topic": "T1"})
                assert plain.unexpected == []  # closed without an answer, as Java does
            assert await route_brokers(tls) == ["broker-a"]
        assert metric(proc, "nsfleet_remoting_tls_failures_total", "plaintext_refused") == 1


async def test_disabled_refuses_tls_and_keeps_serving(
        redis_server: RedisServer, tmp_path: Path, pki: Pki) -> None:
    with worker(redis_server, tmp_path) as proc:
        async with connected(await RemotingClient.connect(proc.remoting_port)) as plain:
            await register_and_read(plain)
            assert await refused(proc.remoting_port, client_context(pki))
            assert await route_brokers(plain) == ["broker-a"]


async def test_required_client_certificate(redis_server: RedisServer, tmp_path: Path,
                                           pki: Pki) -> None:
    files = server_files(pki, ca_file=str(pki.ca.cert_file), client_auth="require")
    with worker(redis_server, tmp_path, mode="enforcing", **files) as proc:
        port = proc.remoting_port
        assert await refused(port, client_context(pki))
        assert await refused(port, client_context(pki, pki.stranger))
        async with connected(await tls_connect(port, client_context(pki, pki.client))) as tls:
            await register_and_read(tls)
        assert metric(proc, "nsfleet_remoting_tls_failures_total", "handshake") == 2


async def test_optional_client_certificate(redis_server: RedisServer, tmp_path: Path,
                                           pki: Pki) -> None:
    files = server_files(pki, ca_file=str(pki.ca.cert_file), client_auth="optional")
    with worker(redis_server, tmp_path, mode="permissive", **files) as proc:
        port = proc.remoting_port
        async with connected(await tls_connect(port, client_context(pki))) as anonymous:
            await register_and_read(anonymous)
            client = await tls_connect(port, client_context(pki, pki.client))
            async with connected(client) as known:
                assert await route_brokers(known) == ["broker-a"]
        assert await refused(port, client_context(pki, pki.stranger))  # sent, so verified


async def test_proxy_header_then_tls(redis_server: RedisServer, tmp_path: Path,
                                     pki: Pki) -> None:
    with worker(redis_server, tmp_path, mode="enforcing", **server_files(pki)) as proc:
        header = b"PROXY TCP4 203.0.113.7 10.0.0.9 40001 9876\r\n"
        ctx = client_context(pki)
        async with connected(await tls_connect(proc.remoting_port, ctx, header)) as tls:
            await register_and_read(tls)
        # The audit line of the registration names the client the PROXY header gave.
        log_text = proc.log_path.read_text()
        assert "203.0.113.7:40001" in log_text
        # A PROXY header inside TLS is no PROXY header: the connection is closed as a bad frame.
        async with connected(await tls_connect(proc.remoting_port, ctx)) as inner:
            inner.send_raw(b"PROXY TCP4 198.51.100.1 10.0.0.9 40002 9876\r\n")
            assert await inner.wait_closed_by_peer()
        assert "198.51.100.1" not in proc.log_path.read_text()


async def test_bad_handshakes_leave_other_connections_alone(
        redis_server: RedisServer, tmp_path: Path, pki: Pki) -> None:
    with worker(redis_server, tmp_path, mode="permissive", **server_files(pki)) as proc:
        port = proc.remoting_port
        async with connected(await tls_connect(port, client_context(pki))) as tls, \
                connected(await RemotingClient.connect(port)) as plain:
            await register_and_read(tls)
            untrusting = ssl.create_default_context()  # does not trust the fleet's CA
            with pytest.raises(ssl.SSLCertVerificationError):
                await tls_connect(port, untrusting)
            async with connected(await RemotingClient.connect(port)) as garbage:
                garbage.send_raw(b"\x16\x03\x01\x00\x05hello" + b"\x00" * 64)
                assert await garbage.wait_closed_by_peer()
            assert await route_brokers(tls) == ["broker-a"]
            assert await route_brokers(plain) == ["broker-a"]
        assert metric(proc, "nsfleet_remoting_tls_failures_total", "handshake") == 2


async def test_certificate_reload(redis_server: RedisServer, tmp_path: Path, pki: Pki) -> None:
    live = tmp_path / "live"
    live.mkdir()
    cert, key = live / "tls.crt", live / "tls.key"

    def install(issued: Issued | None, garbage: bool = False) -> None:
        # Written aside and renamed, as a Kubernetes Secret update swaps files.
        for src, dst in ((issued.cert_file, cert), (issued.key_file, key)) if issued else ():
            tmp = dst.with_suffix(".tmp")
            tmp.write_bytes(src.read_bytes())
            os.replace(tmp, dst)
        if garbage:
            cert.write_text("not a certificate\n")

    install(pki.server)
    second = pki.ca.issue("server-2", server=True)
    files = {"cert_file": str(cert), "key_file": str(key), "reload_interval": "0.2"}
    with worker(redis_server, tmp_path, mode="enforcing", **files) as proc:
        ctx = client_context(pki)

        async def served_serial() -> int:
            client = await tls_connect(proc.remoting_port, ctx)
            async with connected(client):
                der = client.writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
                return serial_of(der)

        async with connected(await tls_connect(proc.remoting_port, ctx)) as old:
            await register_and_read(old)
            assert await served_serial() == pki.server.serial
            install(second)
            deadline = time.monotonic() + 10
            while await served_serial() != second.serial:
                assert time.monotonic() < deadline, "the new certificate was not served"
                await asyncio.sleep(0.1)
            assert await route_brokers(old) == ["broker-a"]  # opened before: still served
            install(None, garbage=True)
            deadline = time.monotonic() + 10
            while "do not load" not in proc.log_path.read_text():
                assert time.monotonic() < deadline, "the bad file was not noticed"
                await asyncio.sleep(0.1)
            assert await served_serial() == second.serial  # the last good one stays
        assert metric(proc, "nsfleet_tls_reloads_total", "ok") == 1
        assert metric(proc, "nsfleet_tls_reloads_total", "failed") == 1


@pytest.mark.parametrize("problem", ["missing", "garbage", "no-ca"])
def test_bad_files_stop_the_start(redis_server: RedisServer, tmp_path: Path, pki: Pki,
                                  problem: str) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    env = {**os.environ, "NSFLEET_REDIS_URL": redis_server.url, "NSFLEET_HOST": "127.0.0.1",
           "NSFLEET_TLS_MODE": "enforcing", "NSFLEET_TLS_KEY_FILE": str(pki.server.key_file),
           "NSFLEET_TLS_CERT_FILE": {"missing": str(tmp_path / "absent.pem"),
                                     "garbage": str(garbage),
                                     "no-ca": str(pki.server.cert_file)}[problem]}
    if problem == "no-ca":
        env["NSFLEET_TLS_CLIENT_AUTH"] = "require"
    done = subprocess.run([sys.executable, "-m", "nsfleet", "serve"], env=env, timeout=60,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    expected = {"missing": "tls-cert-file: cannot read", "garbage": "is not a PEM certificate",
                "no-ca": "tls-ca-file: required with tls-client-auth require"}[problem]
    assert expected in done.stderr


def test_admin_over_tls(redis_server: RedisServer, tmp_path: Path, pki: Pki) -> None:
    files = server_files(pki, ca_file=str(pki.ca.cert_file), client_auth="require")
    with worker(redis_server, tmp_path, mode="enforcing", **files) as proc:
        n = f"127.0.0.1:{proc.remoting_port}"

        def admin(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "nsfleet", "admin", "-n", n, "--json",
                                   *args, "topic-list"], capture_output=True, text=True,
                                  timeout=60, stdin=subprocess.DEVNULL)

        ok = admin("--tls-ca-file", str(pki.ca.cert_file),
                   "--tls-cert-file", str(pki.client.cert_file),
                   "--tls-key-file", str(pki.client.key_file))
        assert ok.returncode == 0, ok.stderr
        assert admin().returncode == 1  # plaintext: closed
        no_cert = admin("--tls-ca-file", str(pki.ca.cert_file))
        assert no_cert.returncode == 1 and "no NameServer answered" in no_cert.stderr
        untrusted = admin("--tls")  # the system CAs do not know the fleet's
        assert untrusted.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr
        insecure = admin("--tls-insecure", "--tls-cert-file", str(pki.client.cert_file),
                         "--tls-key-file", str(pki.client.key_file))
        assert insecure.returncode == 0, insecure.stderr
        missing = admin("--tls-ca-file", str(tmp_path / "absent.pem"))
        assert missing.returncode == 1 and "TLS files" in missing.stderr


def test_copy_config_writes_a_remoting_target_over_tls(redis_server: RedisServer, tmp_path: Path,
                                                     pki: Pki) -> None:
    """``copy-config --apply`` writes to a remoting target with the same TLS options it reads
    with (one option parser for every command)."""
    files = server_files(pki, ca_file=str(pki.ca.cert_file), client_auth="require")
    with worker(redis_server, tmp_path, mode="enforcing", **files) as source, \
            worker(redis_server, tmp_path, mode="enforcing", **files) as target:
        put = urllib.request.Request(f"{source.url}/v1/kv/ORDER_TOPIC_CONFIG/OrderTopic",
                                     data=b'{"value": "broker-a:4"}', method="PUT",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(put, timeout=10):
            pass
        done = subprocess.run(
            [sys.executable, "-m", "nsfleet", "admin", "copy-config", "--apply",
             "--from", f"127.0.0.1:{source.remoting_port}",
             "--to", f"127.0.0.1:{target.remoting_port}",
             "--tls-ca-file", str(pki.ca.cert_file), "--tls-cert-file", str(pki.client.cert_file),
             "--tls-key-file", str(pki.client.key_file)],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        with urllib.request.urlopen(f"{target.url}/v1/kv/ORDER_TOPIC_CONFIG/OrderTopic",
                                    timeout=10) as resp:
            assert json.loads(resp.read())["value"] == "broker-a:4"


def test_simulated_brokers_over_tls(redis_server: RedisServer, tmp_path: Path, pki: Pki) -> None:
    """``nsfleet simulate -n`` takes admin's TLS options: its brokers register, heartbeat and
    unregister over TLS with a client certificate; in plaintext they are closed."""
    files = server_files(pki, ca_file=str(pki.ca.cert_file), client_auth="require")
    with worker(redis_server, tmp_path, mode="enforcing", **files) as proc:
        def simulate(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "nsfleet", "simulate", "--brokers", "3", "--topics", "2",
                 "-n", f"127.0.0.1:{proc.remoting_port}", "--duration", "0.5", "--heartbeat",
                 "0.1", "--timeout", "2", "--json", *args],
                capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)

        ok = simulate("--tls-ca-file", str(pki.ca.cert_file),
                      "--tls-cert-file", str(pki.client.cert_file),
                      "--tls-key-file", str(pki.client.key_file))
        assert ok.returncode == 0, ok.stderr
        summary = json.loads(ok.stdout)
        assert (summary["registered"], summary["unregistered"]) == (3, 3)
        assert metric(proc, "nsfleet_remoting_connections_by_transport_total", "tls") >= 3
        plaintext = simulate()
        assert plaintext.returncode == 1 and "0/3 brokers registered" in plaintext.stderr


@contextlib.contextmanager
def haproxy(tmp_path: Path, bind: str, server: str) -> Iterator[int]:
    """A local HAProxy in TCP mode in front of one worker; yields its port."""
    if not HAPROXY.exists():
        pytest.skip("haproxy is not installed")
    port = free_port()
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(f"""defaults
    mode tcp
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend rocketmq
    bind 127.0.0.1:{port}{bind}
    default_backend nsfleet
backend nsfleet
    server w1 {server}
""")
    with (tmp_path / "haproxy.log").open("wb") as out:
        proc = subprocess.Popen([str(HAPROXY), "-db", "-f", str(cfg)], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            assert proc.poll() is None, (tmp_path / "haproxy.log").read_text()
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            assert time.monotonic() < deadline, "haproxy did not start"
            time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


async def assert_proxied(port: int, ctx: ssl.SSLContext, proc: WorkerProcess) -> None:
    """Register and read through the proxy; the worker logs the client's own address."""
    async with connected(await tls_connect(port, ctx)) as client:
        await register_and_read(client)
        local = client.writer.get_extra_info("sockname")
        await async_wait_until(lambda: f"127.0.0.1:{local[1]}" in proc.log_path.read_text())


async def test_haproxy_tls_passthrough_with_proxy_protocol(
        redis_server: RedisServer, tmp_path: Path, pki: Pki) -> None:
    with worker(redis_server, tmp_path, mode="enforcing", **server_files(pki)) as proc, \
            haproxy(tmp_path, "", f"127.0.0.1:{proc.remoting_port} send-proxy-v2") as port:
        await assert_proxied(port, client_context(pki), proc)


async def test_haproxy_tls_termination_reencrypting_to_the_worker(
        redis_server: RedisServer, tmp_path: Path, pki: Pki) -> None:
    bundle = tmp_path / "haproxy.pem"
    bundle.write_bytes(pki.server.cert_file.read_bytes() + pki.server.key_file.read_bytes())
    files = server_files(pki, ca_file=str(pki.ca.cert_file), client_auth="require")
    client_pair = tmp_path / "haproxy-client.pem"
    client_pair.write_bytes(pki.client.cert_file.read_bytes() + pki.client.key_file.read_bytes())
    server = (f"127.0.0.1:{{}} send-proxy-v2 ssl verify required ca-file {pki.ca.cert_file} "
              f"crt {client_pair}")
    with worker(redis_server, tmp_path, mode="enforcing", **files) as proc, \
            haproxy(tmp_path, f" ssl crt {bundle}", server.format(proc.remoting_port)) as port:
        await assert_proxied(port, client_context(pki), proc)
