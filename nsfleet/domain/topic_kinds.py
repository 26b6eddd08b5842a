"""What kind of topic a name is, as RocketMQ names them, so the console can group or hide the
topics no application created: ``retry`` (MixAll's ``%RETRY%<group>`` consumer retry topics),
``dlq`` (``%DLQ%<group>``), ``system`` (TopicValidator.isSystemTopic: the SYSTEM_TOPIC_SET below
or the ``rmq_sys_`` prefix; plus the topics a broker registers under its cluster's and its own
name, which GET_SYSTEM_TOPIC_LIST_FROM_NS lists), else ``normal``.
"""

from __future__ import annotations

from collections.abc import Collection

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
SYSTEM_PREFIX = "rmq_sys_"
# TopicValidator.SYSTEM_TOPIC_SET (RocketMQ 5.x), plus BenchmarkTest, which brokers create too.
SYSTEM_TOPICS = frozenset({
    "TBW102",                       # AUTO_CREATE_TOPIC_KEY_TOPIC
    "SCHEDULE_TOPIC_XXXX",          # RMQ_SYS_SCHEDULE_TOPIC
    "BenchmarkTest",                # RMQ_SYS_BENCHMARK_TOPIC
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
})
KINDS = ("normal", "retry", "dlq", "system")


def topic_kind(topic: str, own_names: Collection[str] = ()) -> str:
    """The topic's kind; ``own_names`` are the fleet's cluster and broker group names."""
    if topic.startswith(RETRY_PREFIX):
        return "retry"
    if topic.startswith(DLQ_PREFIX):
        return "dlq"
    if topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_PREFIX) or topic in own_names:
        return "system"
    return "normal"
