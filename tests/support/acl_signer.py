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
