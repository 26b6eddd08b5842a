"""The Java client's request signing, re-implemented for tests from AclClientRPCHook and
AclUtils (rocketmq-acl), independently of nsfleet.security, so the signature tests do not check
nsfleet against itself.

doBeforeRequest: put AccessKey (and SecurityToken) into the extFields; copy them into a TreeMap
(Java String order: UTF-16 code units); append every value except Signature's to a
StringBuilder; getBytes(UTF-8) followed by the body; HmacSHA1 with the secret key; Base64.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac


def _java_compare(a: str, b: str) -> int:
    ua, ub = a.encode("utf-16-be", "surrogatepass"), b.encode("utf-16-be", "surrogatepass")
    return (ua > ub) - (ua < ub)


def cal_signature(data: bytes, secret_key: str) -> str:
    return base64.b64encode(hmac.new(secret_key.encode(), data, hashlib.sha1).digest()).decode()


def combine_request_content(fields: dict[str, str], body: bytes | None) -> bytes:
    tree = sorted(fields, key=functools.cmp_to_key(_java_compare))
    sb = "".join(fields[k] for k in tree if k != "Signature")
    return sb.encode("utf-8") + (body or b"")


def java_sign(ext_fields: dict[str, str] | None, body: bytes | None, access_key: str,
              secret_key: str, security_token: str | None = None) -> dict[str, str]:
    """A copy of ``ext_fields`` as the Java client sends it, signed."""
    fields = dict(ext_fields or {})
    fields["AccessKey"] = access_key
    if security_token is not None:
        fields["SecurityToken"] = security_token
    fields["Signature"] = cal_signature(combine_request_content(fields, body), secret_key)
    return fields


# The C++ client (rocketmq-client-cpp 2.x, librocketmq; the `rocketmq-client-python` and
# `rocketmq-python-cvs` packages wrap it): ClientRPCHook::signCommand puts AccessKey and
# OnsChannel (SessionCredentials' authChannel, "ALIYUN" unless set) into a std::map with the
# command header's declared fields, concatenates the values in the map's (byte) order, appends
# the body, signs with spas_sign (Base64 of HmacSHA1 keyed with the secret key), and adds
# Signature, AccessKey and OnsChannel to the extFields. The hook is installed whether or not
# credentials were set: without them the AccessKey and the secret are empty strings.
CPP_AUTH_CHANNEL = "ALIYUN"


def cpp_sign(ext_fields: dict[str, str] | None, body: bytes | None, access_key: str = "",
             secret_key: str = "", auth_channel: str = CPP_AUTH_CHANNEL) -> dict[str, str]:
    """A copy of ``ext_fields`` (the header's declared fields) as the C++ client sends it; by
    default as it does without credentials: ``AccessKey: ""``, ``OnsChannel``, and a Signature
    keyed with an empty secret."""
    header_map = {**(ext_fields or {}), "AccessKey": access_key, "OnsChannel": auth_channel}
    total = "".join(header_map[k] for k in sorted(header_map, key=lambda k: k.encode()))
    signature = cal_signature(total.encode("utf-8") + (body or b""), secret_key)
    return {**(ext_fields or {}), "Signature": signature, "AccessKey": access_key,
            "OnsChannel": auth_channel}
