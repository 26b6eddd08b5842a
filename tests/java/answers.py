"""What the 4.9.8 Java client decoded, put in an order-free form: a client keeps no order of
BrokerDatas, QueueDatas or topic lists (it sorts queues itself), Java's own order is HashMap's."""

from __future__ import annotations

from typing import Any


def normal(op: str, answer: dict[str, Any]) -> Any:
    if "error" in answer:
        return ("error", answer["error"])
    value = answer["ok"]
    if op.startswith("route|") and isinstance(value, dict):
        return {**value,
                "brokerDatas": sorted(value.get("brokerDatas") or [],
                                      key=lambda b: b["brokerName"]),
                "queueDatas": sorted(value.get("queueDatas") or [],
                                     key=lambda q: q["brokerName"])}
    if op.startswith("cluster") and isinstance(value, dict):
        return {**value, "clusterAddrTable": {k: sorted(v) for k, v in
                                              (value.get("clusterAddrTable") or {}).items()}}
    if op.startswith(("topics", "bycluster")) and isinstance(value, list):
        return sorted(value)
    return value


def by_ns(answers: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {ns: {op: normal(op, a) for op, a in ops.items()} for ns, ops in answers.items()}
