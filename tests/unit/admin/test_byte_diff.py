"""``nsfleet admin diff --bytes``'s comparison of two raw answers (admin/byte_diff.py)."""

from __future__ import annotations

from nsfleet.admin.byte_diff import compare_answers, requests
from nsfleet.wire.codec import RemotingCommand


def answer(body: bytes | None = None, *, code: int = 0, version: int = 409,
           remark: str | None = None,
           ext_fields: dict[str, str] | None = None) -> RemotingCommand:
    return RemotingCommand(code=code, version=version, remark=remark, ext_fields=ext_fields,
                           body=body)


def test_identical_answers_have_no_difference() -> None:
    assert compare_answers("106", answer(b'{"a":1}'), answer(b'{"a":1}')) == []


def test_each_differing_part_is_reported() -> None:
    diffs = compare_answers("105 topic=T", answer(code=17, remark="x"),
                            answer(code=17, remark="y", version=479, ext_fields={}))
    assert [(d.part, d.left, d.right) for d in diffs] == [
        ("remark", "'x'", "'y'"), ("version", "409", "479"), ("extFields", "None", "{}")]


def test_a_body_in_another_order_is_marked_order_only() -> None:
    (d,) = compare_answers("206", answer(b'{"topicList":["b","a"]}'),
                           answer(b'{"topicList":["a","b"]}'))
    assert (d.part, d.order_only) == ("body", True)
    assert d.left.startswith("@15 of 23: ")
    (d,) = compare_answers("105", answer(b'{"x":{0:"a"}}'),
                           answer(b'{"x":{"0":"a"},"y":false}'))
    assert (d.part, d.order_only) == ("body", False)


def test_requests_cover_every_topic_cluster_and_namespace() -> None:
    asked = requests(["T2", "T1"], ["c1"], ["ns"])
    assert [code for code, _ in asked] == [106, 206, 304, 105, 105, 105, 224, 219]
    assert asked[4:6] == [(105, {"topic": "T1"}), (105, {"topic": "T2"})]
