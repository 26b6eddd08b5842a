"""Access control on the remoting port, over real remoting on real Redis: requests signed as the
Java client signs them for every code class, refusals (NO_PERMISSION, 16) that write nothing,
permissive mode, unsigned brokers from the allowlist, trusted PROXY headers, the audit trail's
account, and a reload of the accounts file."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from structlog.testing import capture_logs

from nsfleet.redis_server import RedisServer
from nsfleet.security.policy import READ_CODES, SERVED_CODES
from tests.support.acl_signer import cpp_sign, java_sign
from tests.support.remoting_client import (
    NO_PERMISSION,
    ROCKETMQ,
    SUCCESS,
    TOPIC_NOT_EXIST,
    Broker,
    Command,
    RemotingClient,
    TopicConf,
    Worker,
    dumps_fastjson,
    running_worker,
)

pytestmark = pytest.mark.redis

ACCOUNTS = """
globalWhiteRemoteAddresses: [10.10.0.0/16]
accounts:
  - {accessKey: rocketmq2, secretKey: "12345678", admin: true}
  - {accessKey: reader, secretKey: reader-secret}
"""
ADMIN, READER = ("rocketmq2", "12345678"), ("reader", "reader-secret")
BROKER = Broker("c1", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912",
                [TopicConf("T1", 4, 4), TopicConf("T2", 8, 8)])


def proxy_v1(source: str) -> bytes:
    return f"PROXY TCP4 {source} 127.0.0.1 40000 9876\r\n".encode()


def request_for(code: int) -> tuple[dict[str, str], bytes | None]:
    """Plausible extFields and body for each served code (what mqadmin or a broker sends)."""
    ident = BROKER.identity()
    return {
        100: ({"namespace": "NS", "key": "k", "value": "v"}, None),
        101: ({"namespace": "NS", "key": "k"}, None),
        102: ({"namespace": "NS", "key": "k"}, None),
        103: (BROKER.register_5x().ext_fields or {}, BROKER.register_5x().body),
        104: (ident, None),
        105: ({"topic": "T1"}, None),
        106: ({}, None),
        205: ({"brokerName": "broker-a"}, None),
        206: ({}, None),
        216: ({"topic": "T9"}, None),
        217: ({"topic": "T9"}, dumps_fastjson({"queueDatas": [
            {"brokerName": "broker-a", "perm": 6, "readQueueNums": 1, "topicSysFlag": 0,
             "writeQueueNums": 1}]})),
        219: ({"namespace": "NS"}, None),
        224: ({"cluster": "c1"}, None),
        304: ({}, None), 311: ({}, None), 312: ({}, None), 313: ({}, None),
        318: ({}, b"clusterTest=true"),
        319: ({}, None),
        322: (ident, dumps_fastjson(BROKER.dv(True))),
        327: ({"brokerName": "broker-a"}, None),
        901: ({"clusterName": "c1", "brokerName": "broker-a"}, None),
        904: ({k: ident[k] for k in ("brokerAddr", "brokerName", "clusterName")}, None),
        # The controller's (docs/controller.md), as a broker in controller mode or mqadmin.
        1001: ({"brokerName": "broker-a", "masterBrokerId": "1", "masterEpoch": "1"},
               b'{"syncStateSet":[1],"syncStateSetEpoch":1}'),
        1002: ({"clusterName": "c1", "brokerName": "broker-a", "brokerId": "1",
                "designateElect": "false"}, None),
        1003: ({"clusterName": "c1", "brokerName": "broker-a", "brokerId": "1",
                "brokerAddress": "10.0.0.1:10911"}, None),
        1004: ({"brokerName": "broker-a"}, None),
        1005: ({}, None),
        1006: ({}, b'["broker-a"]'),
        1009: ({}, b"notifyBrokerRoleChanged=true"),
        1010: ({}, None),
        1011: ({"clusterName": "c1", "brokerName": "broker-a"}, None),
        1012: ({"clusterName": "c1", "brokerName": "broker-a"}, None),
        1013: ({"clusterName": "c1", "brokerName": "broker-a", "appliedBrokerId": "1",
                "registerCheckCode": "10.0.0.1:10911;1"}, None),
    }[code]


def signed(code: int, creds: tuple[str, str] | None) -> Command:
    fields, body = request_for(code)
    if creds is not None:
        fields = java_sign(fields, body, *creds)
    return Command(code, dict(fields), body)


@pytest.fixture
def acl_file(tmp_path: Path) -> Path:
    path = tmp_path / "acl.yml"
    path.write_text(ACCOUNTS)
    return path


@pytest.fixture
async def enforcing(redis_server: RedisServer, acl_file: Path) -> AsyncIterator[Worker]:
    async with running_worker(redis_server.url, acl_mode="enforcing", acl_file=str(acl_file),
                              acl_reload_interval=0.2, trusted_proxies="127.0.0.1") as w:
        yield w


async def denied_count(worker: Worker, reason: str, served: str) -> float:
    async with aiohttp.ClientSession() as http, http.get(f"{worker.http_url}/metrics") as resp:
        text = await resp.text()
    labels = f'protocol="remoting",reason="{reason}",served="{served}"'
    found = re.search(r"nsfleet_access_denied_total\{" + labels + r"\} (\S+)", text)
    return float(found.group(1)) if found else 0.0


async def test_every_code_class_signed_and_unsigned(enforcing: Worker) -> None:
    client = await enforcing.connect()
    try:
        for code in sorted(SERVED_CODES):
            before = await enforcing.snapshot()
            unsigned = await client.call(signed(code, None))
            assert (unsigned.code, unsigned.remark) == (NO_PERMISSION,
                                                        "No accessKey is configured"), code
            reader = await client.call(signed(code, READER))
            if code in READ_CODES:
                assert reader.code != NO_PERMISSION, code
            else:
                assert reader.code == NO_PERMISSION, code
                assert reader.remark == (f"Need admin permission for request code={code}, "
                                         "but accessKey=reader is not")
                assert await enforcing.snapshot() == before, code  # refused: nothing written
            admin = await client.call(signed(code, ADMIN))
            assert admin.code != NO_PERMISSION, (code, admin.remark)
    finally:
        await client.close()


async def test_bad_signatures_fail_with_16_and_write_nothing(enforcing: Worker) -> None:
    client = await enforcing.connect()
    try:
        assert (await client.call(signed(103, ADMIN))).code == SUCCESS
        before = await enforcing.snapshot()
        wrong = Command(100, java_sign({"namespace": "NS", "key": "k", "value": "v"}, None,
                                       "rocketmq2", "not-the-secret"))
        missing = signed(100, ADMIN)
        assert missing.ext_fields is not None
        del missing.ext_fields["Signature"]
        tampered = signed(103, ADMIN)
        tampered.body = BROKER.register_5x().body.replace(b'"T2"', b'"T3"')  # type: ignore
        replayed = signed(216, ADMIN)  # a captured DELETE_TOPIC for T9, replayed for T1
        assert replayed.ext_fields is not None
        replayed.ext_fields["topic"] = "T1"
        unknown = Command(100, java_sign({"namespace": "NS", "key": "k", "value": "v"}, None,
                                         "nobody", "x"))
        for cmd, remark in ((wrong, "Check signature failed for accessKey=rocketmq2"),
                            (missing, "Check signature failed for accessKey=rocketmq2"),
                            (tampered, "Check signature failed for accessKey=rocketmq2"),
                            (replayed, "Check signature failed for accessKey=rocketmq2"),
                            (unknown, "No acl config for nobody")):
            answer = await client.call(cmd)
            assert (answer.code, answer.remark) == (NO_PERMISSION, remark)
            assert "12345678" not in (answer.remark or "")
        assert await enforcing.snapshot() == before
        assert await denied_count(enforcing, "bad_signature", "false") == 4
        # the connection is still served
        assert (await client.call(signed(105, READER))).code == SUCCESS
    finally:
        await client.close()


async def test_binary_headers_and_late_zone_fields_verify(enforcing: Worker) -> None:
    client = await enforcing.connect()
    try:
        binary = signed(105, READER)
        binary.serialize_type = ROCKETMQ
        assert (await client.call(binary)).code == TOPIC_NOT_EXIST  # verified, then served
        zoned = signed(105, READER)  # DynamicalExtFieldRPCHook runs after the ACL hook
        assert zoned.ext_fields is not None
        zoned.ext_fields.update({"__ZONE_NAME": "zone-a", "__ZONE_MODE": "true"})
        assert (await client.call(zoned)).code == TOPIC_NOT_EXIST
    finally:
        await client.close()


async def test_allowlisted_unsigned_broker_registers_others_are_refused(
        enforcing: Worker) -> None:
    outside = await RemotingClient.connect(enforcing.port, prefix=proxy_v1("8.8.8.8"))
    inside = await RemotingClient.connect(enforcing.port, prefix=proxy_v1("10.10.4.5"))
    try:
        before = await enforcing.snapshot()
        refused = await outside.call(BROKER.register_5x())
        assert (refused.code, refused.remark) == (NO_PERMISSION, "No accessKey is configured")
        assert await enforcing.snapshot() == before
        assert (await inside.call(BROKER.register_49())).code == SUCCESS
        assert (await inside.call(BROKER.query_data_version())).code == SUCCESS
        assert (await inside.request(105, {"topic": "T1"})).code == SUCCESS
        # but not an admin code, allowlist or not
        wipe = await inside.request(205, {"brokerName": "broker-a"})
        assert wipe.code == NO_PERMISSION
    finally:
        await outside.close()
        await inside.close()


async def test_proxy_header_from_an_untrusted_peer_closes(redis_server: RedisServer,
                                                          acl_file: Path) -> None:
    async with running_worker(redis_server.url, acl_mode="enforcing", acl_file=str(acl_file),
                              trusted_proxies="10.99.0.0/16") as worker:
        spoof = await RemotingClient.connect(worker.port, prefix=proxy_v1("10.10.4.5"))
        try:
            spoof.send(BROKER.register_49())
            assert await spoof.wait_closed_by_peer()
            assert spoof.unexpected == []
        finally:
            await spoof.close()
        # Only the worker's own presence and advertised address (P:idx:worker*), and the store's
        # layout, decided at start.
        assert [k for k in await worker.snapshot()
                if ":idx:worker" not in k and not k.endswith(":layout")] == []


async def test_acl_off_keeps_java_behaviour(redis_server: RedisServer) -> None:
    async with running_worker(redis_server.url) as worker:
        client = await RemotingClient.connect(worker.port, prefix=proxy_v1("8.8.8.8"))
        try:
            assert (await client.call(signed(100, None))).code == SUCCESS
        finally:
            await client.close()


async def test_permissive_serves_and_counts(redis_server: RedisServer, acl_file: Path) -> None:
    async with running_worker(redis_server.url, acl_mode="permissive",
                              acl_file=str(acl_file)) as worker:
        client = await worker.connect()
        try:
            assert (await client.call(signed(100, None))).code == SUCCESS
            bad = Command(102, java_sign({"namespace": "NS", "key": "k"}, None, "rocketmq2",
                                         "wrong"))
            assert (await client.call(bad)).code == SUCCESS
            assert (await client.call(signed(105, ADMIN))).code != NO_PERMISSION
        finally:
            await client.close()
        assert await denied_count(worker, "unsigned", "true") == 1
        assert await denied_count(worker, "bad_signature", "true") == 1


async def test_audit_names_account_and_real_address(enforcing: Worker) -> None:
    client = await RemotingClient.connect(enforcing.port, prefix=proxy_v1("10.10.7.7"))
    try:
        with capture_logs() as logs:
            assert (await client.call(signed(100, ADMIN))).code == SUCCESS
            assert (await client.call(signed(318, ADMIN))).code == SUCCESS
            assert (await client.call(BROKER.register_49())).code == SUCCESS
    finally:
        await client.close()
    trail = {e["event"]: e for e in logs if e.get("audit")}
    assert trail["kv put"]["account"] == "rocketmq2"
    assert trail["kv put"]["remote"] == "10.10.7.7:40000"
    assert trail["namesrv config updated"]["account"] == "rocketmq2"
    assert trail["broker registered"]["account"] == "unsigned@global-allowlist"


async def test_accounts_file_reload_without_restart(enforcing: Worker, acl_file: Path) -> None:
    client = await enforcing.connect()
    newcomer = ("newcomer", "fresh-secret")
    try:
        assert (await client.call(signed(100, newcomer))).code == NO_PERMISSION
        await asyncio.to_thread(acl_file.write_text, ACCOUNTS + (
            "  - {accessKey: newcomer, secretKey: fresh-secret, admin: true}\n"))
        for _ in range(50):
            if (await client.call(signed(100, newcomer))).code == SUCCESS:
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the new account was not picked up")
        # a bad version: the last good one stays
        await asyncio.to_thread(acl_file.write_text, "accounts: [{accessKey: broken}]")
        await asyncio.sleep(0.6)
        assert (await client.call(signed(100, newcomer))).code == SUCCESS
    finally:
        await client.close()


# --- clients that sign with an empty AccessKey (issue 26) ---------------------------------------

def cpp_unsigned(code: int) -> Command:
    """A request exactly as the C++ client (librocketmq 2.x) sends it without credentials:
    ``AccessKey: ""``, ``OnsChannel: ALIYUN`` and a Signature keyed with an empty secret."""
    fields, body = request_for(code)
    return Command(code, cpp_sign(fields, body), body)


async def test_cpp_client_without_credentials_reads_with_anonymous_reads(
        redis_server: RedisServer, acl_file: Path) -> None:
    async with running_worker(redis_server.url, acl_mode="enforcing", acl_file=str(acl_file),
                              acl_anonymous_reads=True) as worker:
        client = await worker.connect()
        try:
            assert (await client.call(signed(103, ADMIN))).code == SUCCESS
            route = await client.call(cpp_unsigned(105))
            assert route.code == SUCCESS, route.remark
            assert b"broker-a" in (route.body or b"")
            assert (await client.call(cpp_unsigned(106))).code == SUCCESS
            before = await worker.snapshot()
            for code in (100, 103, 205, 216, 318):
                refused = await client.call(cpp_unsigned(code))
                assert (refused.code, refused.remark) == (
                    NO_PERMISSION, "No accessKey is configured"), code
            assert await worker.snapshot() == before  # refused: nothing written
            blank = cpp_unsigned(100)
            assert blank.ext_fields is not None
            blank.ext_fields["AccessKey"] = "  "
            assert (await client.call(blank)).code == NO_PERMISSION
        finally:
            await client.close()
        assert await denied_count(worker, "unsigned", "false") == 6
        assert await denied_count(worker, "unknown_account", "false") == 0


async def test_permissive_counts_the_empty_key_as_unsigned(redis_server: RedisServer,
                                                           acl_file: Path) -> None:
    async with running_worker(redis_server.url, acl_mode="permissive",
                              acl_file=str(acl_file)) as worker:
        client = await worker.connect()
        try:
            assert (await client.call(cpp_unsigned(105))).code == TOPIC_NOT_EXIST  # served
            assert (await client.call(cpp_unsigned(100))).code == SUCCESS  # served, counted
            raw = await client.call(signed(100, None))  # no AccessKey field at all
            assert raw.code == SUCCESS
        finally:
            await client.close()
        assert await denied_count(worker, "unsigned", "true") == 3
        assert await denied_count(worker, "unknown_account", "true") == 0
