"""HTTP access control on a real worker over real Redis: bearer tokens (401 without a valid one,
403 without the scope, JSON errors, nothing written), open or token-guarded probes, permissive
mode, and the PROXY protocol on the HTTP port from trusted and untrusted peers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from nsfleet.redis_server import RedisServer
from tests.support.remoting_client import Worker, running_worker

pytestmark = pytest.mark.redis

READ, WRITE, PROBE = "read-token-0123456789", "write-token-0123456789", "probe-token-0123456789"
BROKER = {"clusterName": "c1", "brokerAddr": "10.0.0.1:10911", "brokerName": "broker-a",
          "brokerId": 0, "dataVersion": {"counter": 1, "timestamp": 1},
          "topicConfigTable": {"T1": {}, "T2": {}}}


def token_files(tmp_path: Path, **tokens: str) -> dict[str, str]:
    out = {}
    for name, token in tokens.items():
        path = tmp_path / name
        path.write_text(token + "\n")
        out[f"{name}_token_file"] = str(path)
    return out


@pytest.fixture
async def guarded(redis_server: RedisServer, tmp_path: Path) -> AsyncIterator[Worker]:
    async with running_worker(redis_server.url, **token_files(tmp_path, read=READ,
                                                              write=WRITE)) as w:
        yield w


async def call(worker: Worker, method: str, path: str, token: str | None = None,
               body: Any = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as http, http.request(
            method, worker.http_url + path, json=body, headers=headers) as resp:
        data = await resp.read()
        return resp.status, (await resp.json() if resp.content_type == "application/json"
                             else data)


WRITES = [("POST", "/v1/brokers/register", BROKER), ("PUT", "/v1/kv/NS/k", {"value": "v"}),
          ("PUT", "/v1/namesrv-config", {"clusterTest": "true"}),
          ("DELETE", "/v1/topics/T1", None), ("POST", "/v1/brokers/broker-a/wipe-write-perm",
                                             None)]


@pytest.mark.parametrize("method,path,body", WRITES)
async def test_writes_need_a_write_token(guarded: Worker, method: str, path: str,
                                         body: Any) -> None:
    if path.endswith("-write-perm"):  # a group no broker registered would be a 404
        assert (await call(guarded, "POST", "/v1/brokers/register", WRITE, BROKER))[0] == 200
    before = await guarded.snapshot()
    status, error = await call(guarded, method, path, None, body)
    assert status == 401 and error["code"] == 16 and "bearer token" in error["error"]
    status, error = await call(guarded, method, path, "not-a-token-at-all", body)
    assert (status, error["code"], error["error"]) == (401, 16, "unknown bearer token")
    status, error = await call(guarded, method, path, READ, body)
    assert status == 403 and error["code"] == 16
    assert error["error"] == "token 'read-token-file' has scope read; this request needs write"
    assert await guarded.snapshot() == before
    assert (await call(guarded, method, path, WRITE, body))[0] == 200


async def test_reads_need_a_read_or_write_token(guarded: Worker) -> None:
    assert (await call(guarded, "GET", "/v1/cluster-info"))[0] == 401
    assert (await call(guarded, "GET", "/v1/cluster-info", READ))[0] == 200
    assert (await call(guarded, "GET", "/v1/cluster-info", WRITE))[0] == 200
    assert (await call(guarded, "POST", "/v1/routes/watch?wait=0", READ,
                       {"topics": {"T1": None}}))[0] in (200, 304)


async def test_probes_console_and_openapi_stay_open(guarded: Worker) -> None:
    for path in ("/livez", "/readyz", "/metrics", "/openapi.json", "/ui",
                 "/ui/static/console.js", "/favicon.ico"):
        assert (await call(guarded, "GET", path))[0] == 200, path


async def test_probe_token_guards_probes(redis_server: RedisServer, tmp_path: Path) -> None:
    files = token_files(tmp_path, read=READ, probe=PROBE)
    async with running_worker(redis_server.url, **files) as worker:
        for path in ("/livez", "/readyz", "/metrics"):
            assert (await call(worker, "GET", path))[0] == 401
            assert (await call(worker, "GET", path, PROBE))[0] == 200
            assert (await call(worker, "GET", path, READ))[0] == 200
        assert (await call(worker, "GET", "/v1/cluster-info", PROBE))[0] == 403


async def test_tokens_from_the_accounts_file_and_audit_account(redis_server: RedisServer,
                                                               tmp_path: Path) -> None:
    acl = tmp_path / "acl.yml"
    acl.write_text(f"tokens: [{{name: ci, token: {WRITE}, scope: write}}]\n")
    async with running_worker(redis_server.url, acl_file=str(acl)) as worker:
        with capture_logs() as logs:
            assert (await call(worker, "PUT", "/v1/kv/NS/k", WRITE, {"value": "v"}))[0] == 200
        trail = [e for e in logs if e.get("audit")]
        assert [(e["event"], e["account"], e["remote"]) for e in trail] == [
            ("kv put", "ci", "127.0.0.1")]


async def test_permissive_serves_and_counts(redis_server: RedisServer, tmp_path: Path) -> None:
    acl = tmp_path / "acl.yml"
    acl.write_text("accounts: []\n")
    files = token_files(tmp_path, write=WRITE)
    async with running_worker(redis_server.url, acl_mode="permissive", acl_file=str(acl),
                              **files) as worker:
        assert (await call(worker, "PUT", "/v1/kv/NS/k", None, {"value": "v"}))[0] == 200
        text = (await call(worker, "GET", "/metrics"))[1]
        assert ('nsfleet_access_denied_total{protocol="http",reason="no_token",served="true"} '
                '1.0') in text.decode()


async def raw_http(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), 5.0)
    finally:
        writer.close()


def put_kv(token: str) -> bytes:
    body = b'{"value": "v"}'
    return (b"PUT /v1/kv/NS/k HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            b"Content-Type: application/json\r\nAuthorization: Bearer " + token.encode() +
            b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


PROXY = b"PROXY TCP4 203.0.113.9 127.0.0.1 51000 8080\r\n"


async def test_proxy_protocol_on_http_from_a_trusted_peer(redis_server: RedisServer,
                                                          tmp_path: Path) -> None:
    async with running_worker(redis_server.url, http_proxy_protocol=True,
                              trusted_proxies="127.0.0.0/8",
                              **token_files(tmp_path, write=WRITE)) as worker:
        port = worker.settings.http_port
        with capture_logs() as logs:
            assert (await raw_http(port, PROXY + put_kv(WRITE))).startswith(b"HTTP/1.1 200")
            # a trusted peer may also connect without a header (a health check)
            assert (await raw_http(port, put_kv(WRITE))).startswith(b"HTTP/1.1 200")
        remotes = [e["remote"] for e in logs if e.get("audit")]
        assert remotes == ["203.0.113.9"]  # the second put changed nothing, so no line


async def test_proxy_header_from_an_untrusted_peer_is_not_believed(
        redis_server: RedisServer, tmp_path: Path) -> None:
    async with running_worker(redis_server.url, http_proxy_protocol=True,
                              trusted_proxies="10.99.0.0/16",
                              **token_files(tmp_path, write=WRITE)) as worker:
        before = await worker.snapshot()
        answer = await raw_http(worker.settings.http_port, PROXY + put_kv(WRITE))
        assert answer.split(b"\r\n", 1)[0].endswith(b" 400 Bad Request")  # not a request
        assert await worker.snapshot() == before


async def test_cached_route_reads_still_need_a_token(redis_server: RedisServer,
                                                     tmp_path: Path) -> None:
    """With tokens on, the cached-route shortcut in front of the application is not installed:
    a route the cache holds is still refused without a token."""
    files = token_files(tmp_path, read=READ, write=WRITE)
    async with running_worker(redis_server.url, route_cache=True, **files) as worker:
        assert (await call(worker, "POST", "/v1/brokers/register", WRITE, BROKER))[0] == 200
        for _ in range(2):  # the second read is a cache hit
            assert (await call(worker, "GET", "/v1/routes/T1", READ))[0] == 200
        assert (await call(worker, "GET", "/v1/routes/T1"))[0] == 401


async def test_without_tokens_cached_route_reads_go_around_the_application(
        redis_server: RedisServer) -> None:
    async with running_worker(redis_server.url, route_cache=True) as worker:
        assert (await call(worker, "POST", "/v1/brokers/register", None, BROKER))[0] == 200
        for _ in range(3):
            assert (await call(worker, "GET", "/v1/routes/T1"))[0] == 200
        status, text = await call(worker, "GET", "/metrics")
        assert status == 200
        # Only the first read (the miss) went through the application's middleware.
        assert ('nsfleet_http_request_seconds_count{method="GET",route="/v1/routes/{topic}"} 1.0'
                in text.decode())
