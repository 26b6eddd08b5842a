"""Python clients of an nsfleet fleet over its JSON HTTP API: a broker's registration loop and a
producer's or consumer's route cache."""

from nsfleet.client.broker_agent import BrokerAgent, clamp_interval
from nsfleet.client.broker_loop import AgentStats, BrokerIdentity
from nsfleet.client.http import ApiError, FleetHttp, FleetUnavailable, parse_servers
from nsfleet.client.queues import (
    MessageQueue,
    TopicPublishInfo,
    default_topic_route,
    publish_info,
    subscribe_queues,
)
from nsfleet.client.route_client import RouteClient, TopicNotFound
from nsfleet.client.sync_agent import SyncBrokerAgent

__all__ = [
    "AgentStats",
    "ApiError",
    "BrokerAgent",
    "BrokerIdentity",
    "FleetHttp",
    "FleetUnavailable",
    "MessageQueue",
    "RouteClient",
    "SyncBrokerAgent",
    "TopicNotFound",
    "TopicPublishInfo",
    "clamp_interval",
    "default_topic_route",
    "parse_servers",
    "publish_info",
    "subscribe_queues",
]
