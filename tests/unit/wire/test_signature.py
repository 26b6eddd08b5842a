"""ACL 1.0 signatures (nsfleet.wire.signature) against RocketMQ's test vector and a
re-implementation of the Java client's signing; the accounts file, address rules, the
request-code classes and the reload of the files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from nsfleet.security.accounts import AccountsFileError, Scope, parse
from nsfleet.security.addresses import AddressRules, BadAddressRule
from nsfleet.security.policy import (
    READ_CODES,
    SERVED_CODES,
    UNSIGNED_BROKER_CODES,
    WRITE_CODES,
    Mode,
    RemotingGuard,
    decide,
)
from nsfleet.security.reloader import AccessFiles
from nsfleet.wire import signature
from tests.support.acl_signer import (
    cal_signature,
    combine_request_content,
    cpp_sign,
    java_sign,
)

VECTOR = "IUc8rrO/0gDch8CjObLQsW2rsiA="  # AclUtilsTest: HmacSHA1("12345678", "RocketMQ")


def test_rocketmq_vector_both_implementations() -> None:
    assert signature.calc_signature(b"RocketMQ", "12345678") == VECTOR
    assert cal_signature(b"RocketMQ", "12345678") == VECTOR


def test_route_request_signs_access_key_then_topic() -> None:
    fields = {"topic": "TopicTest", "AccessKey": "rocketmq2"}
    assert combine_request_content(fields, None) == b"rocketmq2TopicTest"
    assert signature.content(fields, None) == b"rocketmq2TopicTest"
    signed = java_sign({"topic": "TopicTest"}, None, "rocketmq2", "12345678")
    assert signed["Signature"] == cal_signature(b"rocketmq2TopicTest", "12345678")


@pytest.mark.parametrize("fields,body", [
    ({"topic": "TopicTest"}, None),
    ({"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:4"}, None),
    ({"brokerName": "broker-a", "clusterName": "c1", "bodyCrc32": "123"}, b'{"x":1}'),
    ({"k\U0001F600": "v\u00e9", "k\uff01": "w", "z": ""}, b"\x00\xff"),  # UTF-16 order
    ({}, b"raw body"),
])
def test_java_signed_requests_verify(fields: dict[str, str], body: bytes | None) -> None:
    signed = java_sign(fields, body, "ak", "secret-1", security_token="tok")
    assert signature.verify(signed, body, 479, "secret-1")
    assert not signature.verify(signed, body, 479, "secret-2")
    assert not signature.verify(signed, (body or b"") + b"x", 479, "secret-1")
    assert not signature.verify({**signed, "extra": "1"}, body, 479, "secret-1")
    assert signature.sign(dict(fields), body, "ak", "secret-1", "tok") == signed


def test_zone_fields_added_after_signing_still_verify() -> None:
    signed = java_sign({"topic": "T"}, None, "ak", "s")
    with_zone = {**signed, "__ZONE_NAME": "zone-a", "__ZONE_MODE": "true"}
    assert signature.verify(with_zone, None, 479, "s")
    # signed with the zone fields in (a hook order that signs them) verifies too
    assert signature.verify(java_sign({"topic": "T", "__ZONE_NAME": "z"}, None, "ak", "s"),
                            None, 479, "s")
    assert not signature.verify({**with_zone, "topic": "U"}, None, 479, "s")


def test_unique_key_query_dropped_only_for_old_clients() -> None:
    signed = java_sign({"topic": "T"}, None, "ak", "s")
    late = {**signed, "_UNIQUE_KEY_QUERY": "true"}  # added after signing by <= V4_9_3
    assert signature.verify(late, None, signature.V4_9_3, "s")
    assert not signature.verify(late, None, signature.V4_9_3 + 1, "s")


def test_missing_or_garbled_signature_fails() -> None:
    signed = java_sign({"topic": "T"}, None, "ak", "s")
    del signed["Signature"]
    assert not signature.verify(signed, None, 479, "s")
    assert not signature.verify({**signed, "Signature": "\udcff"}, None, 479, "s")


# --- address rules ---------------------------------------------------------------------------

@pytest.mark.parametrize("rule,peer,hit", [
    ("192.168.0.*", "192.168.0.7:5000", True),
    ("192.168.0.*", "192.168.1.7:5000", False),
    ("192.168.*.*", "192.168.9.9:1", True),
    ("192.168.0.1-10", "192.168.0.10:1", True),
    ("192.168.0.1-10", "192.168.0.11:1", False),
    ("192.168.0.{1,3}", "192.168.0.3:1", True),
    ("192.168.0.{1,3}", "192.168.0.2:1", False),
    ("10.0.0.0/8", "10.9.8.7:1", True),
    ("10.0.0.0/8", "11.0.0.1:1", False),
    ("10.0.0.0/8", "[::ffff:10.1.1.1]:1", True),
    ("fd00::/8", "[fd00::1]:9876", True),
    ("127.0.0.1", "127.0.0.1:9", True),
    ("*", "8.8.8.8:1", True),
])
def test_address_rules(rule: str, peer: str, hit: bool) -> None:
    assert AddressRules([rule]).match(peer) is hit


@pytest.mark.parametrize("rule", ["192.168.0", "192.168.0.300", "a.b.c.d", "10.0.0.0/99"])
def test_bad_address_rules_are_refused(rule: str) -> None:
    with pytest.raises(BadAddressRule):
        AddressRules([rule])


# --- the accounts file and the decision ------------------------------------------------------

ACCOUNTS = """
globalWhiteRemoteAddresses:
  - 10.10.0.0/16
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress: 192.168.0.*
    admin: false
    topicPerms: [topicA=DENY]
  - accessKey: rocketmq2
    secretKey: "12345678"
    admin: true
  - accessKey: broker-a
    secretKey: broker-secret
    broker: true
tokens:
  - {name: ci, token: write-token-0123456789, scope: write}
  - {name: grafana, token: read-token-0123456789, scope: read}
"""


def test_accounts_file_in_plain_acl_format() -> None:
    config = parse(ACCOUNTS)
    assert config.accounts["RocketMQ"].secret_key == "12345678"  # a YAML number
    assert config.accounts["rocketmq2"].admin and config.accounts["broker-a"].broker
    token = config.token("read-token-0123456789")
    assert token is not None and token.name == "grafana" and token.scope is Scope.READ
    assert config.token("read-token-01234567890") is None


@pytest.mark.parametrize("text", [
    "accounts: [{accessKey: a}]", "accounts: [{accessKey: a, secretKey: s, admin: yes!}]",
    "accounts: {a: b}", "tokens: [{name: t, token: short}]", "- a list", "a: [",
    "globalWhiteRemoteAddresses: [10.0.0.999]",
    "accounts: [{accessKey: a, secretKey: s}, {accessKey: a, secretKey: t}]",
    "tokens: [{name: t, token: 0123456789abcdef, scope: admin}]",
])
def test_bad_accounts_files_are_refused(text: str) -> None:
    with pytest.raises(AccountsFileError):
        parse(text)


def test_code_classes_cover_every_served_code() -> None:
    from nsfleet.remoting.server import ENDPOINTS

    assert set(ENDPOINTS) == SERVED_CODES
    assert not READ_CODES & WRITE_CODES


def _signed(code: int, ak: str, secret: str, peer: str = "8.8.8.8:1") -> str | None:
    fields = java_sign({"topic": "T"}, None, ak, secret)
    return decide(parse(ACCOUNTS), code, fields, None, 479, peer).denied


@pytest.mark.parametrize("code", sorted(SERVED_CODES))
def test_admin_account_may_send_every_code(code: int) -> None:
    assert _signed(code, "rocketmq2", "12345678") is None


@pytest.mark.parametrize("code", sorted(SERVED_CODES))
def test_plain_account_reads_only(code: int) -> None:
    denied = _signed(code, "RocketMQ", "12345678")
    if code in READ_CODES:
        assert denied is None
    else:
        assert denied == (f"Need admin permission for request code={code}, but "
                          "accessKey=RocketMQ is not")


@pytest.mark.parametrize("code", sorted(SERVED_CODES))
def test_broker_account_reads_and_sends_broker_codes(code: int) -> None:
    denied = _signed(code, "broker-a", "broker-secret")
    # The controller's broker writes too (a broker in controller mode); its clean is admin's.
    broker = {103, 104, 904, 322, 1001, 1002, 1003, 1013}
    assert (denied is None) is (code in READ_CODES or code in broker)


def test_refusals_never_carry_the_secret_or_the_signature() -> None:
    config = parse(ACCOUNTS)
    fields = java_sign({"topic": "T"}, None, "rocketmq2", "wrong")
    right = java_sign({"topic": "T"}, None, "rocketmq2", "12345678")["Signature"]
    verdict = decide(config, 105, fields, None, 479, "8.8.8.8:1")
    assert verdict.denied == "Check signature failed for accessKey=rocketmq2"
    assert "12345678" not in verdict.denied and right not in verdict.denied
    assert decide(config, 105, {**fields, "AccessKey": "nobody"}, None, 479,
                  "8.8.8.8:1").denied == "No acl config for nobody"


@pytest.mark.parametrize("code", sorted(SERVED_CODES))
def test_unsigned_requests(code: int) -> None:
    config = parse(ACCOUNTS)
    allowlisted = decide(config, code, {}, None, 479, "10.10.3.4:1")
    assert (allowlisted.denied is None) is (code in UNSIGNED_BROKER_CODES)
    # an account's whiteRemoteAddress admits unsigned broker codes too
    assert (decide(config, code, {}, None, 479, "192.168.0.5:1").denied is None) is (
        code in UNSIGNED_BROKER_CODES)
    outside = decide(config, code, None, None, 479, "8.8.8.8:1")
    assert outside.denied == "No accessKey is configured"
    anonymous = decide(config, code, None, None, 479, "8.8.8.8:1", anonymous_reads=True)
    assert (anonymous.denied is None) is (code in READ_CODES)


def _empty_key_forms(fields: dict[str, str], key: str) -> list[dict[str, str]]:
    """Every signing form a client sends, with ``key`` (empty or blank) as the AccessKey."""
    return [
        cpp_sign(fields, None, key),  # the C++ client without credentials: AccessKey, OnsChannel
        cpp_sign(fields, None, key, auth_channel=""),
        java_sign(fields, None, key, ""),  # AclClientRPCHook with empty credentials
        java_sign(fields, None, key, "", security_token="sts-token"),
        {**fields, "AccessKey": key},  # no Signature at all
        {**cpp_sign(fields, None, key), "SecurityToken": ""},
    ]


def test_cpp_client_frame_as_sent_without_credentials() -> None:
    frame = cpp_sign({"topic": "TopicTest"}, None)
    assert set(frame) == {"topic", "AccessKey", "OnsChannel", "Signature"}
    assert frame["AccessKey"] == "" and frame["OnsChannel"] == "ALIYUN"
    # std::map order: AccessKey, OnsChannel, topic; an HMAC keyed with the empty secret
    assert frame["Signature"] == cal_signature(b"ALIYUNTopicTest", "")
    # with credentials the C++ client's signature is the Java one over the same fields
    signed = cpp_sign({"topic": "TopicTest"}, b"body", "ak", "sk")
    assert signature.verify(signed, b"body", 479, "sk")


@pytest.mark.parametrize("key", ["", " ", "\t \n"])
@pytest.mark.parametrize("code", sorted(SERVED_CODES))
def test_empty_access_key_is_unsigned_in_every_signing_form(key: str, code: int) -> None:
    config = parse(ACCOUNTS)
    for fields in _empty_key_forms({"topic": "T"}, key):
        outside = decide(config, code, fields, None, 479, "8.8.8.8:1")
        assert (outside.principal, outside.denied, outside.reason) == (
            "-", "No accessKey is configured", "unsigned"), fields
        anonymous = decide(config, code, fields, None, 479, "8.8.8.8:1", anonymous_reads=True)
        assert (anonymous.denied is None) is (code in READ_CODES), fields
        if anonymous.denied is None:
            assert anonymous.principal == "anonymous"
        # the unsigned-broker allowlist, global and per account
        for peer in ("10.10.3.4:1", "192.168.0.5:1"):
            allowlisted = decide(config, code, fields, None, 479, peer)
            assert (allowlisted.denied is None) is (code in UNSIGNED_BROKER_CODES), fields


def test_blank_access_key_in_the_accounts_file_is_refused() -> None:
    with pytest.raises(AccountsFileError, match="accessKey"):
        parse("accounts: [{accessKey: '  ', secretKey: s}]")


def test_account_white_address_skips_the_signature_as_java() -> None:
    config = parse(ACCOUNTS)
    fields = {"topic": "T", "AccessKey": "RocketMQ"}  # no Signature at all
    assert decide(config, 105, fields, None, 479, "192.168.0.9:1").denied is None
    assert decide(config, 105, fields, None, 479, "192.168.1.9:1").denied is not None
    assert decide(config, 100, fields, None, 479, "192.168.0.9:1").denied is not None  # perm


def test_unserved_codes_pass_to_be_answered_not_supported() -> None:
    assert decide(parse(ACCOUNTS), 34, None, None, 479, "8.8.8.8:1").denied is None


# --- reload ----------------------------------------------------------------------------------

def test_reload_on_change_keeps_last_good_and_follows_symlink_swaps(tmp_path: Path) -> None:
    # A Kubernetes Secret volume: acl.yml -> ..data/acl.yml, ..data -> ..2024_01 (swapped).
    v1, v2, v3 = (tmp_path / n for n in ("..v1", "..v2", "..v3"))
    for d, text in ((v1, ACCOUNTS), (v2, "accounts: [{accessKey: new, secretKey: s}]"),
                    (v3, "accounts: [{accessKey: broken}]")):
        d.mkdir()
        (d / "acl.yml").write_text(text)
    (tmp_path / "..data").symlink_to(v1.name)
    (tmp_path / "acl.yml").symlink_to("..data/acl.yml")
    token = tmp_path / "read-token"
    token.write_text("read-file-token-0123456789\n")
    files = AccessFiles(str(tmp_path / "acl.yml"), {Scope.READ: str(token)})
    assert "rocketmq2" in files.current.accounts
    assert files.current.token("read-file-token-0123456789") is not None
    assert not files.reload()  # unchanged

    def swap(target: Path) -> None:
        tmp = tmp_path / "..data_tmp"
        tmp.symlink_to(target.name)
        os.replace(tmp, tmp_path / "..data")

    swap(v2)
    assert files.reload() and set(files.current.accounts) == {"new"}
    swap(v3)  # a bad version: the last good one stays
    assert not files.reload() and set(files.current.accounts) == {"new"}
    token.write_text("another-token-0123456789")
    swap(v1)
    assert files.reload()
    assert files.current.token("read-file-token-0123456789") is None
    assert files.current.token("another-token-0123456789") is not None


def test_bad_file_at_start_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "acl.yml").write_text("accounts: [{accessKey: a}]")
    with pytest.raises(AccountsFileError, match="secretKey"):
        AccessFiles(str(tmp_path / "acl.yml"))
    with pytest.raises(AccountsFileError):
        AccessFiles(str(tmp_path / "missing.yml"))


def test_refusal_logs_are_limited_per_client_reason_and_code() -> None:
    from nsfleet.security.policy import LogLimiter

    limiter = LogLimiter(every=60.0, max_keys=3)
    assert limiter.allow("10.0.0.1", "unsigned", "105")
    assert not limiter.allow("10.0.0.1", "unsigned", "105")
    assert limiter.allow("10.0.0.1", "unsigned", "100")
    assert limiter.allow("10.0.0.2", "unsigned", "105")
    assert limiter.allow("10.0.0.3", "unsigned", "105")  # over max_keys: forgets, stays bounded
    assert len(limiter._last) == 1
    always = LogLimiter(every=0.0)
    assert always.allow("a") and always.allow("a")


@pytest.mark.parametrize("mode", [Mode.PERMISSIVE, Mode.ENFORCING])
def test_guard_counts_and_logs_the_empty_key_as_unsigned_in_both_modes(mode: Mode) -> None:
    config = parse(ACCOUNTS)
    counted: list[tuple[str, str, bool]] = []
    guard = RemotingGuard(mode, lambda: config, lambda *a: counted.append(a),
                          anonymous_reads=True)
    empty = cpp_sign({"topic": "T"}, None)
    nobody = java_sign({"topic": "T"}, None, "nobodyAK", "x")
    with capture_logs() as logs:
        assert guard.check(105, empty, None, 479, "8.8.8.8:1") == ("anonymous", None)
        refused = guard.check(100, empty, None, 479, "8.8.8.8:1")
        assert refused == ("-", "No accessKey is configured" if mode is Mode.ENFORCING else None)
        # another reason on the same code and host: its own limit, so it is logged too
        guard.check(100, nobody, None, 479, "8.8.8.8:2")
        # the same reason, code and host within the minute: counted, not logged
        guard.check(100, cpp_sign({"topic": "T"}, None, " "), None, 479, "8.8.8.8:3")
        guard.check(100, java_sign({"topic": "T"}, None, "otherAK", "x"), None, 479, "8.8.8.8:4")
    served = mode is Mode.PERMISSIVE
    assert counted == [("remoting", "unsigned", served), ("remoting", "unknown_account", served),
                       ("remoting", "unsigned", served), ("remoting", "unknown_account", served)]
    assert [(e["log_level"], e["principal"], e["reason"]) for e in logs] == [
        ("warning", "-", "No accessKey is configured"),
        ("warning", "nobodyAK", "No acl config for nobodyAK")]
