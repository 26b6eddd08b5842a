"""``nsfleet admin diff --bytes``: the raw answers of two remoting name services to the same
requests, compared byte by byte (code, remark, header version, extFields, body).

The decoded comparison (diff.py) says whether clients see the same thing; this says where the
bytes on the wire differ, even when no client could tell: a field one side adds, the order of a
list, a remark's wording. Requests go out as a client of ``--client-version`` (5.3.3 by default;
409 asks as a 4.9.8 client), so each side answers that client's generation. The report is for
reading: it never changes diff's exit status."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nsfleet.client.remoting_name_service import RemotingNameService
from nsfleet.wire.codec import RemotingCommand, RequestCode
from nsfleet.wire.fastjson import loads_lenient

ABSENT_TOPIC = "nsfleet-diff-no-such-topic"  # asks each side for its "topic not exist" answer
WINDOW = 48  # bytes of body shown either side of the first difference


@dataclass(frozen=True)
class RawDifference:
    request: str  # "105 topic=T1"
    part: str  # code, remark, version, extFields, body
    left: str
    right: str
    order_only: bool = False  # body: the same once list and key order are ignored

    def to_json(self) -> dict[str, Any]:
        return {"request": self.request, "part": self.part, "a": self.left, "b": self.right,
                "orderOnly": self.order_only}


def requests(topics: Iterable[str], clusters: Iterable[str],
             namespaces: Iterable[str]) -> list[tuple[int, dict[str, str] | None]]:
    """What is asked of both sides: cluster info, topic lists, each route (and one for a topic
    neither has), each cluster's topics, each KV namespace, the config."""
    asked: list[tuple[int, dict[str, str] | None]] = [
        (RequestCode.GET_BROKER_CLUSTER_INFO, None),
        (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, None),
        (RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, None),
        (RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": ABSENT_TOPIC}),
    ]
    asked += [(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": t}) for t in sorted(topics)]
    asked += [(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": c}) for c in sorted(clusters)]
    asked += [(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": n}) for n in sorted(namespaces)]
    return asked


def _label(code: int, ext: dict[str, str] | None) -> str:
    return " ".join([str(int(code)), *(f"{k}={v}" for k, v in sorted((ext or {}).items()))])


def _canonical(value: Any) -> Any:
    """JSON with every list sorted and every object's keys in order: equal when two bodies
    differ only in order."""
    if isinstance(value, dict):
        return tuple(sorted((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(sorted((_canonical(v) for v in value), key=repr))
    return value


def _order_only(a: bytes, b: bytes) -> bool:
    try:
        return _canonical(loads_lenient(a)) == _canonical(loads_lenient(b))
    except ValueError:
        return False


def _around(data: bytes, at: int) -> str:
    start = max(0, at - WINDOW)
    text = data[start:at + WINDOW].decode("utf-8", "replace")
    return f"@{at} of {len(data)}: {'…' if start else ''}{text}" \
           f"{'…' if at + WINDOW < len(data) else ''}"


def compare_answers(label: str, a: RemotingCommand, b: RemotingCommand) -> list[RawDifference]:
    out = [RawDifference(label, part, repr(x), repr(y))
           for part, x, y in (("code", a.code, b.code), ("remark", a.remark, b.remark),
                              ("version", a.version, b.version),
                              ("extFields", a.ext_fields, b.ext_fields))
           if x != y]
    body_a, body_b = a.body or b"", b.body or b""
    if body_a != body_b:
        at = next((i for i, (x, y) in enumerate(zip(body_a, body_b, strict=False)) if x != y),
                  min(len(body_a), len(body_b)))
        out.append(RawDifference(label, "body", _around(body_a, at), _around(body_b, at),
                                 _order_only(body_a, body_b)))
    return out


async def byte_differences(a: RemotingNameService, b: RemotingNameService, *,
                           topics: Iterable[str], clusters: Iterable[str],
                           namespaces: Iterable[str], version: int) -> list[RawDifference]:
    """Ask both sides every request of ``requests`` as a client of ``version``; one entry per
    differing part of an answer."""
    out: list[RawDifference] = []
    for code, ext in requests(topics, clusters, namespaces):
        left = await a.transport.call(code, ext, version=version)
        right = await b.transport.call(code, ext, version=version)
        out += compare_answers(_label(code, ext), left, right)
    return out
