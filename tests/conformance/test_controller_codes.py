"""The controller's request codes over the remoting port, as the 5.3.3 brokers and mqadmin send
them (the conversation captured against Java's controller: shared/java-rocketmq5-controller
/RESULTS.md and capture/), answered with Java's codes, remarks, response headers and bodies;
every refusal writes nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nsfleet.redis_server import RedisServer, free_port
from tests.support.remoting_client import (
    SUCCESS,
    SYSTEM_ERROR,
    Command,
    RemotingClient,
    Worker,
    running_worker,
    wait_for_port,
)

pytestmark = pytest.mark.redis

B0, B1 = "127.0.0.1:30911", "127.0.0.1:30921"


async def call(client: RemotingClient, code: int, ext: dict[str, str] | None = None,
               body: bytes | None = None) -> Command:
    return await client.request(code, ext, body)


def ident(broker_id: int | None = None, **more: str) -> dict[str, str]:
    ext = {"clusterName": "DefaultCluster", "brokerName": "broker-a", **more}
    if broker_id is not None:
        ext["brokerId"] = str(broker_id)
    return ext


async def heartbeat(client: RemotingClient, broker_id: int, addr: str, *, epoch: int = -1,
                    max_offset: int = 0) -> None:
    await client.oneway(Command(904, {
        "clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerAddr": addr,
        "brokerId": str(broker_id), "epoch": str(epoch), "maxOffset": str(max_offset),
        "confirmOffset": "0", "heartbeatTimeoutMills": "10000",
        "electionPriority": "2147483647"}, None))
    await asyncio.sleep(0.2)  # oneway: no answer to wait for


async def join(client: RemotingClient, broker_id: int, addr: str) -> Command:
    """A broker's start-up: 1012, 1013, 1003, its first 904."""
    resp = await call(client, 1012, ident())
    assert resp.code == SUCCESS and resp.ext_fields == {**ident(), "nextBrokerId": str(broker_id)}
    resp = await call(client, 1013, ident(appliedBrokerId=str(broker_id),
                                          registerCheckCode=f"{addr};1795812236632"))
    assert (resp.code, resp.ext_fields) == (SUCCESS, ident())
    resp = await call(client, 1003, ident(broker_id, brokerAddress=addr,
                                          invokeTime="1795812236882"))
    await heartbeat(client, broker_id, addr)
    return resp


async def test_the_captured_conversation(worker: Worker) -> None:
    b0, b1, admin = await worker.connect(), await worker.connect(), await worker.connect()
    meta = await call(b0, 1005)
    assert meta.code == SUCCESS and meta.ext_fields is not None
    assert meta.ext_fields["isLeader"] == "true"
    assert meta.ext_fields["controllerLeaderAddress"].endswith(f":{worker.port}")
    first = await join(b0, 1, B0)
    assert (first.code, first.ext_fields) == (SUCCESS, ident())  # no master yet
    assert first.body == b'{"syncStateSet":[],"syncStateSetEpoch":0}'
    elect = await call(b0, 1002, ident(1, designateElect="false", invokeTime="1"))
    assert elect.code == SUCCESS, elect.remark
    assert elect.ext_fields == {"masterBrokerId": "1", "masterAddress": B0, "masterEpoch": "1",
                                "syncStateSetEpoch": "1"}
    assert elect.body == (b'{"brokerMemberGroup":{"brokerAddrs":{1:"127.0.0.1:30911"},'
                          b'"brokerName":"broker-a","cluster":"DefaultCluster"},'
                          b'"syncStateSet":[1]}')
    second = await join(b1, 2, B1)
    assert second.ext_fields == {**ident(), "masterBrokerId": "1", "masterAddress": B0,
                                 "masterEpoch": "1", "syncStateSetEpoch": "1"}
    alter = await call(b0, 1001, {"brokerName": "broker-a", "masterBrokerId": "1",
                                  "masterEpoch": "1", "invokeTime": "1"},
                       b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}')
    assert (alter.code, alter.ext_fields) == (SUCCESS, {"newSyncStateSetEpoch": "2"})
    assert alter.body == b'{"syncStateSet":[1,2],"syncStateSetEpoch":2}'
    info = await call(b1, 1004, {"brokerName": "broker-a"})
    assert info.ext_fields == {"masterBrokerId": "1", "masterAddress": B0, "masterEpoch": "1"}
    assert info.body == b'{"syncStateSet":[1,2],"syncStateSetEpoch":2}'
    data = await call(admin, 1006, None, b'["broker-a","nope"]')
    assert data.code == SUCCESS and data.body == (
        b'{"replicasInfoTable":{"broker-a":{"inSyncReplicas":['
        b'{"alive":true,"brokerAddress":"127.0.0.1:30911","brokerId":1,"brokerName":"broker-a"},'
        b'{"alive":true,"brokerAddress":"127.0.0.1:30921","brokerId":2,"brokerName":"broker-a"}'
        b'],"masterAddress":"127.0.0.1:30911","masterBrokerId":1,"masterEpoch":1,'
        b'"notInSyncReplicas":[],"syncStateSetEpoch":2}}}')
    still = await call(b1, 1002, ident(2, designateElect="false"))
    assert (still.code, still.remark) == (2011, "The old master 1 is still alive, not need to "
                                          "elect new master for broker broker-a")
    assert still.body == b'{"syncStateSet":[1]}' or still.body == b'{"syncStateSet":[1,2]}'

    # The master's connection closes (kill -9): the in-sync slave is elected at once.
    await b0.close()
    for _ in range(50):
        info = await call(b1, 1004, {"brokerName": "broker-a"})
        if info.ext_fields and info.ext_fields.get("masterBrokerId") == "2":
            break
        await asyncio.sleep(0.05)
    assert info.ext_fields == {"masterBrokerId": "2", "masterAddress": B1, "masterEpoch": "2"}
    assert info.body == b'{"syncStateSet":[2],"syncStateSetEpoch":3}'
    # The old master, back, still believes it leads: Java's 2002.
    b0 = await worker.connect()
    stale = await call(b0, 1001, {"brokerName": "broker-a", "masterBrokerId": "1",
                                  "masterEpoch": "1"},
                       b'{"syncStateSet":[1,2],"syncStateSetEpoch":2}')
    assert (stale.code, stale.remark) == (
        2002, "Rejecting alter syncStateSet request because the current leader is:{2}, not {1}")
    assert stale.ext_fields == {}
    for c in (b0, b1, admin):
        await c.close()


async def _refused(client: RemotingClient, worker: Worker, code: int, ext: dict[str, str] | None,
                   body: bytes | None, want: tuple[int, str]) -> None:
    before = await worker.snapshot()
    resp = await call(client, code, ext, body)
    assert (resp.code, resp.remark) == want
    assert await worker.snapshot() == before, "a refusal wrote something"


async def test_refusals_have_javas_codes_and_write_nothing(worker: Worker) -> None:
    c = await worker.connect()
    cases: list[tuple[int, dict[str, str] | None, bytes | None, tuple[int, str]]] = [
        (1013, ident(appliedBrokerId="2", registerCheckCode=f"{B0};1"), None,
         (2014, "Broker-set: broker-a hasn't been registered in controller, but broker try to "
                "apply brokerId: 2")),
        (1003, ident(1, brokerAddress=B0), None,
         (2010, "Broker-set: broker-a hasn't been registered in controller")),
        (1002, ident(1, designateElect="false"), None, (2010, "Broker hasn't been registered")),
        (1004, {"brokerName": "broker-a"}, None, (2008, "Broker metadata is not existed")),
        (1011, ident(), None,
         (2009, "Broker broker-a is not existed,clean broker data failure.")),
        (1011, ident(brokerControllerIdsToClean="1;x"), None,
         (2009, 'Please set the option <brokerControllerIdsToClean> according to the format, '
                'exception: java.lang.NumberFormatException: invalid literal for int() with base '
                "10: 'x'")),
        (1012, {"brokerName": "broker-a"}, None,
         (SYSTEM_ERROR, "the custom field <clusterName> is null")),
        (1001, {"brokerName": "broker-a", "masterBrokerId": "1", "masterEpoch": "1"}, b"\x00zz",
         (SYSTEM_ERROR, None)),
    ]
    for code, ext, body, want in cases[:-1]:
        await _refused(c, worker, code, ext, body, want)
    resp = await call(c, 1001, cases[-1][1], cases[-1][2])
    assert resp.code == SYSTEM_ERROR and resp.remark
    # A set with a master: 1013 for a taken id, 1001 with stale epochs or dead replicas.
    await join(c, 1, B0)
    assert (await call(c, 1002, ident(1, designateElect="false"))).code == SUCCESS
    alter: dict[str, Any] = {"brokerName": "broker-a", "masterBrokerId": "1", "masterEpoch": "1"}
    more = [
        (1013, ident(appliedBrokerId="1", registerCheckCode=f"{B1};2"), None,
         (2014, "Fail to apply brokerId: 1 in broker-set: broker-a")),
        (1001, {**alter, "masterEpoch": "7"}, b'{"syncStateSet":[1,2],"syncStateSetEpoch":1}',
         (2000, "Rejecting alter syncStateSet request because the current master epoch is:{1}, "
                "not {7}")),
        (1001, alter, b'{"syncStateSet":[1,2],"syncStateSetEpoch":9}',
         (2001, "Rejecting alter syncStateSet request because the current syncStateSet epoch "
                "is:{1}, not {9}")),
        (1001, alter, b'{"syncStateSet":[1,5],"syncStateSetEpoch":1}',
         (2003, "Rejecting alter syncStateSet request because the replicas {5} don't exist")),
        (1001, alter, b'{"syncStateSet":[1],"syncStateSetEpoch":1}',
         (2013, "The newSyncStateSet is equal with oldSyncStateSet, no needed to update "
                "syncStateSet")),
        (1011, ident(), None, (2009, "Broker broker-a is still alive, clean up failure")),
        (1011, ident(brokerControllerIdsToClean="1"), None,
         (2009, "Broker [broker-a,  1] is still alive, clean up failure")),
    ]
    for code, ext, body, want in more:
        await _refused(c, worker, code, ext, body, want)
    await c.close()


async def test_a_nameserver_heartbeat_is_still_the_nameservers(worker: Worker) -> None:
    """904 without the controller's fields is BROKER_HEARTBEAT as the NameServer answers it."""
    c = await worker.connect()
    resp = await call(c, 904, {"clusterName": "c1", "brokerAddr": "10.0.0.1:1",
                               "brokerName": "b"})
    assert (resp.code, resp.remark) == (SUCCESS, None)
    assert not [k for k in await worker.keys() if ":ctl:" in k]
    await c.close()


async def test_a_controller_port_of_its_own(redis_server: RedisServer) -> None:
    """--controller-port: the controller's codes (only those) on a port of its own, which
    GET_METADATA_INFO names as the leader's, as Java's separate controller address."""
    port = free_port()
    async with running_worker(redis_server.url, controller_port=port) as worker:
        await wait_for_port(port, alive=lambda: not worker.task.done())
        c = await RemotingClient.connect(port)
        meta = await call(c, 1005)
        assert meta.ext_fields is not None
        assert meta.ext_fields["controllerLeaderAddress"] == f"127.0.0.1:{port}"
        route = await call(c, 105, {"topic": "T"})
        assert (route.code, route.remark) == (3, " request type 105 not supported")
        await c.close()


async def test_update_controller_config_applies_to_every_worker(redis_server: RedisServer
                                                                 ) -> None:
    """UPDATE_CONTROLLER_CONFIG (1009) on one worker: GET_CONTROLLER_CONFIG (1010) of another
    shows it (at its next scan); the black list is refused, unparsable text too."""
    async with running_worker(redis_server.url) as one, \
            running_worker(redis_server.url, namespace=one.settings.namespace) as two:
        a, b = await one.connect(), await two.connect()
        resp = await call(a, 1009, None, b"enableElectUncleanMaster=true\nnoSuchKey=1\n")
        assert (resp.code, resp.remark) == (SUCCESS, None)
        assert b"enableElectUncleanMaster=true" in (await call(a, 1010)).body
        for _ in range(60):  # the other worker reads it at its next scan (every 5 s at most)
            if b"enableElectUncleanMaster=true" in (await call(b, 1010)).body:
                break
            await asyncio.sleep(0.1)
        assert b"enableElectUncleanMaster=true" in (await call(b, 1010)).body
        refused = await call(b, 1009, None, b"configStorePath=/tmp/x\n")
        assert (refused.code, refused.remark) == (16, "Can not update config in black list.")
        bad = await call(b, 1009, None, b"k=\\u12\n")
        assert (bad.code, bad.remark) == (SYSTEM_ERROR, "string2Properties error")
        await a.close()
        await b.close()
