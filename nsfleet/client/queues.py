"""Route → message queues, as the Java client derives them (MQClientInstance).

* publish: ``topicRouteData2TopicPublishInfo`` — ``orderTopicConf`` ("brokerA:4;brokerB:4"),
  when non-empty, lists the queues outright; otherwise, for each QueueData sorted by brokerName
  that is writable and whose BrokerData has a master (id 0), ``writeQueueNums`` queues.
* subscribe: ``topicRouteData2TopicSubscribeInfo`` — ``readQueueNums`` queues of every readable
  QueueData. The Java method does not look at ``orderTopicConf``; neither does this one.
* the producer's TBW102 fallback (``updateTopicRouteInfoFromNameServer(topic, isDefault=true)``):
  each QueueData of the default topic's route capped at ``min(defaultTopicQueueNums,
  readQueueNums)`` for both read and write.

Static topics (``topicQueueMappingByBroker``) are not in nsfleet's route model and not handled.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from nsfleet.domain.model import MASTER_ID, TopicRouteData, is_readable, is_writeable

DEFAULT_TOPIC = "TBW102"  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC, producer createTopicKey
DEFAULT_TOPIC_QUEUE_NUMS = 4  # DefaultMQProducer.defaultTopicQueueNums


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int


@dataclass(slots=True)
class TopicPublishInfo:
    """What a producer sends to. ``order_topic``: the queues came from orderTopicConf."""

    topic: str
    message_queues: list[MessageQueue] = field(default_factory=list)
    order_topic: bool = False
    route: TopicRouteData | None = None
    from_default_topic: bool = False

    @property
    def ok(self) -> bool:
        return bool(self.message_queues)


def parse_order_conf(conf: str) -> list[tuple[str, int]]:
    """``"brokerA:4;brokerB:4"`` → [("brokerA", 4), ("brokerB", 4)]. Empty segments are skipped
    (Java's split drops trailing ones); a malformed segment raises ValueError, as Java's
    Integer.parseInt would."""
    out = []
    for segment in conf.split(";"):
        if not segment.strip():
            continue
        name, sep, nums = segment.strip().rpartition(":")
        if not sep or not name or not nums.strip().lstrip("-").isdigit():
            raise ValueError(f"orderTopicConf segment {segment!r} is not brokerName:queueNums")
        out.append((name, int(nums)))
    return out


def publish_info(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    info = TopicPublishInfo(topic, route=route)
    if route.order_topic_conf:
        for name, nums in parse_order_conf(route.order_topic_conf):
            info.message_queues += [MessageQueue(topic, name, i) for i in range(nums)]
        info.order_topic = True
        return info
    # Java sorts the QueueData list by brokerName (QueueData.compareTo); sorted() is stable too.
    brokers = {}
    for bd in route.broker_datas:
        brokers.setdefault(bd.broker_name, bd)  # Java takes the first match
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if not is_writeable(qd.perm):
            continue
        bd = brokers.get(qd.broker_name)
        if bd is None or MASTER_ID not in bd.broker_addrs:
            continue  # only a master accepts messages
        info.message_queues += [MessageQueue(topic, qd.broker_name, i)
                                for i in range(qd.write_queue_nums)]
    return info


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """The subscribe set (a Java HashSet), returned sorted for determinism."""
    queues = {MessageQueue(topic, qd.broker_name, i)
              for qd in route.queue_datas if is_readable(qd.perm)
              for i in range(qd.read_queue_nums)}
    return sorted(queues)


def default_topic_route(route: TopicRouteData,
                        queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS) -> TopicRouteData:
    """A copy of the default topic's route with every QueueData capped for a new topic."""
    capped = copy.deepcopy(route)
    for qd in capped.queue_datas:
        qd.read_queue_nums = qd.write_queue_nums = min(queue_nums, qd.read_queue_nums)
    return capped
