"""One interface to a name service (client/name_service.py): over remoting it answers the same
shapes through either transport (one request per connection, or pipelined), absent things raise
ApiError 404 as over HTTP, and the opener picks the transport from ``bulk``."""

from __future__ import annotations

import pytest

from nsfleet.client.connection import ConnectOptions
from nsfleet.client.http import ApiError
from nsfleet.client.http_name_service import HttpNameService
from nsfleet.client.name_service import kv_tables, open_name_service
from nsfleet.client.pipeline import PipelinedNamesrv
from nsfleet.client.remoting import NamesrvClient
from nsfleet.client.remoting_name_service import RemotingNameService
from nsfleet.domain.errors import ResponseCode
from nsfleet.domain.model import ORDER_TOPIC_CONFIG
from tests.unit.admin.test_snapshot import ANSWERS, java_namesrv


@pytest.mark.parametrize("bulk", [False, True], ids=["one-per-connection", "pipelined"])
async def test_either_remoting_transport_answers_one_shape(bulk: bool) -> None:
    async with java_namesrv(ANSWERS) as addr:
        side = open_name_service(addr, ConnectOptions(timeout=5), bulk=bulk)
        assert isinstance(side, RemotingNameService)
        assert isinstance(side.transport, PipelinedNamesrv if bulk else NamesrvClient)
        try:
            info = await side.cluster_info()
            # Java's bare numeric keys come back as the HTTP API's strings.
            assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {
                "0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}
            assert [b["brokerId"] for b in await side.brokers()] == [0, 1, 0]
            assert await side.topics() == ["OrderTopic", "StaticTopic"]
            route = await side.route("StaticTopic")
            assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911"}
            with pytest.raises(ApiError) as missing:
                await side.route("Nope")
            assert (missing.value.status, missing.value.code) == (
                404, ResponseCode.TOPIC_NOT_EXIST)
            assert await side.routes(["StaticTopic", "Nope"], lambda n: None) == {
                "StaticTopic": route, "Nope": None}
            assert await side.kv_table(ORDER_TOPIC_CONFIG) == {
                "OrderTopic": "broker-a:4;broker-b:4"}
            with pytest.raises(ApiError) as absent:
                await side.kv_table("NOPE")
            assert (absent.value.status, absent.value.code) == (404, ResponseCode.QUERY_NOT_FOUND)
            assert await kv_tables(side, ["NOPE", ORDER_TOPIC_CONFIG]) == {
                "NOPE": None, ORDER_TOPIC_CONFIG: {"OrderTopic": "broker-a:4;broker-b:4"}}
            assert (await side.config())["orderMessageEnable"] == "true"
            assert await side.kv_namespaces() is None
        finally:
            await side.close()


async def test_an_http_side_opens_the_http_api_whatever_bulk_says() -> None:
    for bulk in (False, True):
        side = open_name_service("http://127.0.0.1:1,http://127.0.0.1:2", ConnectOptions(),
                                 bulk=bulk)
        assert isinstance(side, HttpNameService)
        assert side.label == "http://127.0.0.1:1,http://127.0.0.1:2"
        await side.close()
