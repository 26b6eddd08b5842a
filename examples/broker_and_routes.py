"""A broker agent and a route client against an nsfleet fleet, in Python.

    python examples/broker_and_routes.py http://127.0.0.1:8080

The agent registers a broker with two topics and keeps heartbeating (every 30 s by default; 1 s
here); the client reads a route, derives the producer's and the consumer's queues as the Java
client does, then watches both topics: one long-poll for all of them, woken by any change. The
script changes a route itself (wipes the broker's write perm) to show the watch firing.
"""

from __future__ import annotations

import asyncio
import sys

from nsfleet.client import BrokerAgent, BrokerIdentity, RouteClient
from nsfleet.client.http import FleetHttp, path
from nsfleet.domain.model import TopicConfig


async def main(servers: str) -> None:
    broker = BrokerIdentity(cluster="DemoCluster", broker_name="demo-broker",
                            broker_addr="127.0.0.1:10911")
    topics = [TopicConfig("DemoTopic", read_queue_nums=4, write_queue_nums=4),
              TopicConfig("DemoOther", read_queue_nums=2, write_queue_nums=2)]
    async with BrokerAgent(servers, broker, topics, heartbeat_interval=1.0,
                           interval_bounds=None), RouteClient(servers) as routes:
        route = await routes.get_route("DemoTopic")
        print("brokers:", [b.broker_name for b in route.broker_datas])
        print("publish to:", (await routes.publish_info("DemoTopic")).message_queues)
        print("consume from:", await routes.subscribe_queues("DemoTopic"))

        await routes.get_route("DemoOther")  # the watch sends the ETags the client holds
        changes = routes.watch(["DemoTopic", "DemoOther"], wait=10)
        first = asyncio.ensure_future(changes.__anext__())
        admin = FleetHttp(servers)
        await admin.request("POST", path("v1", "brokers", "demo-broker", "wipe-write-perm"))
        await admin.close()
        topic, changed = await asyncio.wait_for(first, 10)
        assert changed is not None
        print("changed:", topic, "perm", changed.queue_datas[0].perm)
        await changes.aclose()
    print("broker unregistered")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"))
