"""REGISTER_BROKER bodies encoded exactly as Java brokers encode them (BrokerOuterAPI,
RegisterBrokerBody.encode, TopicConfig.encode): for tests of the decoder and of whole workers."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from typing import Any, Final

from nsfleet.domain.java import parse_int
from nsfleet.domain.model import DataVersion, TopicConfig
from nsfleet.wire.bodies import RegisterBody
from nsfleet.wire.codec import CURRENT_VERSION, V3_0_11, V5_0_0
from nsfleet.wire.fastjson import dumps_legacy

_INT: Final = struct.Struct(">i")



def _data_version_json(dv: DataVersion, version: int) -> dict[str, int]:
    out = {"counter": dv.counter, "timestamp": dv.timestamp}
    if version >= V5_0_0:  # stateVersion arrived with 5.0
        out["stateVersion"] = dv.state_version
    return out


def _topic_config_json(tc: TopicConfig, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "order": tc.order, "perm": tc.perm, "readQueueNums": tc.read_queue_nums,
        "topicFilterType": "SINGLE_TAG", "topicName": tc.topic_name,
        "topicSysFlag": tc.topic_sys_flag, "writeQueueNums": tc.write_queue_nums,
    }
    if version >= V5_0_0:  # attributes arrived with 5.0
        out["attributes"] = {}
    return out


def _mapping_for_java(info: Mapping[str, Any]) -> dict[str, Any]:
    """Turn numeric ``currIdMap`` keys back into ints so the legacy writer leaves them bare."""
    out = dict(info)
    ids = out.get("currIdMap")
    if isinstance(ids, Mapping):
        out["currIdMap"] = {
            (parsed if isinstance(k, str) and (parsed := parse_int(k)) is not None else k): v
            for k, v in ids.items()}
    return out


def encode_topic_config_line(tc: TopicConfig, version: int = CURRENT_VERSION) -> str:
    """``TopicConfig.encode()``: 5 space-separated fields in 4.x, plus attributes JSON in 5.x."""
    line = f"{tc.topic_name} {tc.read_queue_nums} {tc.write_queue_nums} {tc.perm} SINGLE_TAG"
    return line + " {}" if version >= V5_0_0 else line


def encode_register_body(
    body: RegisterBody, *, compressed: bool = False, version: int = CURRENT_VERSION
) -> bytes:
    """Encode ``body`` as a Java broker of MQVersion ordinal ``version`` would.

    ``version < 37`` gives the bare wrapper JSON; otherwise RegisterBrokerBody as fastjson JSON or,
    with ``compressed``, the BEST_COMPRESSION deflate form. 4.x versions (< 413) leave out
    stateVersion, attributes and the static-topic mapping fields/section, as 4.9 brokers do.
    """
    dv = _data_version_json(body.data_version, version)
    table = {name: _topic_config_json(tc, version) for name, tc in body.topic_config_table.items()}
    if version < V3_0_11:
        return dumps_legacy({"dataVersion": dv, "topicConfigTable": table})
    mappings = {topic: _mapping_for_java(info)
                for topic, info in body.topic_queue_mapping_info.items()}
    if not compressed:
        wrapper: dict[str, Any] = {"dataVersion": dv, "topicConfigTable": table}
        if version >= V5_0_0:
            wrapper["mappingDataVersion"] = DataVersion().to_dict()
            wrapper["topicQueueMappingDetailMap"] = {}
            wrapper["topicQueueMappingInfoMap"] = mappings
        return dumps_legacy({"filterServerList": body.filter_server_list,
                             "topicConfigSerializeWrapper": wrapper})

    def block(data: bytes) -> bytes:
        return _INT.pack(len(data)) + data

    parts = [block(dumps_legacy(dv)), _INT.pack(len(body.topic_config_table))]
    parts.extend(block(encode_topic_config_line(tc, version).encode("utf-8"))
                 for tc in body.topic_config_table.values())
    filters = body.filter_server_list
    parts.append(block(dumps_legacy(filters) if filters is not None else b"null"))
    if version >= V5_0_0:
        parts.append(_INT.pack(len(mappings)))
        parts.extend(block(dumps_legacy(info)) for info in mappings.values())
    return zlib.compress(b"".join(parts), 9)
