"""RocketMQ ACL 1.0 request signatures, as AclClientRPCHook signs and PlainAccessResource /
DefaultAuthenticationContextBuilder (ACL 2.0) verify them.

The signed content is the values of every extField except ``Signature`` in Java's TreeMap order
(String.compareTo, i.e. UTF-16 code units), concatenated and UTF-8 encoded, then the raw body
bytes; the signature is standard Base64 of HmacSHA1 keyed with the secret key. Brokers verifying
requests of clients <= V4_9_3 leave ``_UNIQUE_KEY_QUERY`` out (those clients added it after
signing). The Java client's DynamicalExtFieldRPCHook runs after the ACL hook and adds the zone
fields unsigned, so a request carrying them is also checked without them.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Mapping

ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"  # MixAll.UNIQUE_MSG_QUERY_FLAG
ZONE_FIELDS = ("__ZONE_NAME", "__ZONE_MODE")  # MixAll.ZONE_NAME / ZONE_MODE
V4_9_3 = 400  # MQVersion.Version.V4_9_3.ordinal()


def _java_order(key: str) -> bytes:
    # TreeMap<String> compares UTF-16 code units; Python compares code points (they differ
    # only above U+FFFF against U+E000..U+FFFF).
    return key.encode("utf-16-be", "surrogatepass")


def content(ext_fields: Mapping[str, str], body: bytes | None, *,
            skip: tuple[str, ...] = ()) -> bytes:
    """The bytes AclUtils.combineRequestContent signs."""
    keys = sorted(ext_fields)
    if not all(k.isascii() for k in keys):
        keys.sort(key=_java_order)
    values = "".join(ext_fields[k] for k in keys if k != SIGNATURE and k not in skip)
    return values.encode("utf-8", "surrogatepass") + (body or b"")


def calc_signature(data: bytes, secret_key: str) -> str:
    """AclUtils.calSignature: Base64(HmacSHA1(secret, data))."""
    return base64.b64encode(hmac.digest(secret_key.encode("utf-8"), data, "sha1")).decode("ascii")


def sign(ext_fields: dict[str, str], body: bytes | None, access_key: str, secret_key: str,
         security_token: str | None = None) -> dict[str, str]:
    """What AclClientRPCHook.doBeforeRequest does to a request's extFields (in place, returned):
    AccessKey (and SecurityToken) added, then Signature over everything."""
    ext_fields[ACCESS_KEY] = access_key
    if security_token is not None:
        ext_fields[SECURITY_TOKEN] = security_token
    ext_fields[SIGNATURE] = calc_signature(content(ext_fields, body), secret_key)
    return ext_fields


def verify(ext_fields: Mapping[str, str], body: bytes | None, version: int,
           secret_key: str) -> bool:
    """Whether ``Signature`` is the request's signature under ``secret_key``, compared in
    constant time."""
    given = ext_fields.get(SIGNATURE)
    if given is None:
        return False
    skip: tuple[str, ...] = (UNIQUE_KEY_QUERY,) if version <= V4_9_3 else ()
    given_bytes = given.encode("utf-8", "surrogatepass")
    expected = calc_signature(content(ext_fields, body, skip=skip), secret_key)
    if hmac.compare_digest(given_bytes, expected.encode("ascii")):
        return True
    if any(k in ext_fields for k in ZONE_FIELDS):  # added after signing by the Java client
        expected = calc_signature(content(ext_fields, body, skip=skip + ZONE_FIELDS), secret_key)
        return hmac.compare_digest(given_bytes, expected.encode("ascii"))
    return False
