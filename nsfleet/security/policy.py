"""Who may send which remoting request: request-code classes and the per-request decision.

Decision for a request (enforcing; permissive decides the same, then serves anyway):

* a code nsfleet does not serve passes (it is answered REQUEST_CODE_NOT_SUPPORTED, changes
  nothing);
* no ``AccessKey``, or an empty or whitespace-only one (the C++ client, librocketmq 2.x, signs
  every request and sends ``AccessKey: ""`` with ``OnsChannel`` and a Signature keyed with an
  empty secret when it has no credentials: that is an unsigned request too): a broker code
  (:data:`UNSIGNED_BROKER_CODES`) from an address on the global allowlist or an account's
  whiteRemoteAddress passes, as does a read code when ``anonymous_reads`` is on; anything
  else: "No accessKey is configured";
* an ``AccessKey``: the account must exist; from an address on that account's
  whiteRemoteAddress the signature is not checked (as Java's PlainPermissionManager), otherwise
  it must verify; then the account's permission: admin accounts may send every code, ``broker``
  accounts read codes and the broker codes, other accounts read codes only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

import structlog

from nsfleet.security.accounts import AccessConfig
from nsfleet.security.addresses import host_of
from nsfleet.wire import signature

log = structlog.get_logger("nsfleet.security")


class Mode(Enum):
    OFF = "off"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


# The controller's (docs/controller.md): what a broker in controller mode changes (its
# SyncStateSet, its election, its registration and id) and reads, and the admin's clean.
CONTROLLER_BROKER_WRITES = frozenset({1001, 1002, 1003, 1013})
CONTROLLER_READS = frozenset({1004, 1005, 1006, 1010, 1012})
# Codes that change the tables (or a broker's liveness: 904 and 322 refresh its deadline).
WRITE_CODES = frozenset({100, 102, 103, 104, 205, 216, 217, 318, 327, 904, 322, 1009, 1011,
                         *CONTROLLER_BROKER_WRITES})
READ_CODES = frozenset({101, 105, 106, 206, 219, 224, 304, 311, 312, 313, 319, 901,
                        *CONTROLLER_READS})
# What a 4.9.x-5.2 broker sends a NameServer, unsigned: registration, unregistration, heartbeat,
# the DataVersion query, and the route, cluster-info and member-group reads of its own clients;
# and what a 5.x broker in controller mode sends the controller.
BROKER_WRITE_CODES = frozenset({103, 104, 904, 322, *CONTROLLER_BROKER_WRITES})
UNSIGNED_BROKER_CODES = BROKER_WRITE_CODES | {105, 106, 901, 1004, 1005, 1012}
SERVED_CODES = WRITE_CODES | READ_CODES


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome for one request: who it counts as, and the refusal remark (None: allowed)."""

    principal: str
    denied: str | None = None
    reason: str = ""  # a metric label for refusals


def decide(config: AccessConfig, code: int, ext_fields: Mapping[str, str] | None,
           body: bytes | None, version: int, peer: str, *,
           anonymous_reads: bool = False) -> Verdict:
    if code not in SERVED_CODES:
        return Verdict("-")
    fields = ext_fields or {}
    access_key = fields.get(signature.ACCESS_KEY)
    if access_key is None or not access_key.strip():  # absent or empty: unsigned
        if code in UNSIGNED_BROKER_CODES:
            who = config.unsigned_allowed(peer)
            if who is not None:
                return Verdict(f"unsigned@{who}")
        if anonymous_reads and code in READ_CODES:
            return Verdict("anonymous")
        return Verdict("-", "No accessKey is configured", "unsigned")
    account = config.accounts.get(access_key)
    if account is None:
        return Verdict(access_key, f"No acl config for {access_key}", "unknown_account")
    if not account.white_remote_address.match(peer) and not signature.verify(
            fields, body, version, account.secret_key):
        return Verdict(access_key, f"Check signature failed for accessKey={access_key}",
                       "bad_signature")
    if code in WRITE_CODES and not account.admin and not (account.broker
                                                          and code in BROKER_WRITE_CODES):
        return Verdict(access_key, f"Need admin permission for request code={code}, but "
                                   f"accessKey={access_key} is not", "no_permission")
    return Verdict(access_key)


class LogLimiter:
    """At most one log line per key (client host, reason, code) a minute, in both modes: a
    client not yet configured (permissive) or refused (enforcing) would otherwise log every
    request it sends. Accounts share their reason's limit: two unknown AccessKeys from one host
    on one code within the minute log one line. The counter still counts every refusal."""

    def __init__(self, every: float = 60.0, max_keys: int = 10_000) -> None:
        self.every = every
        self.max_keys = max_keys
        self._last: dict[tuple[str, ...], float] = {}

    def allow(self, *key: str) -> bool:
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.every:
            return False
        if len(self._last) >= self.max_keys:
            self._last.clear()
        self._last[key] = now
        return True


class RemotingGuard:
    """The remoting server's one hook: :meth:`check` answers None to serve the request, or the
    NO_PERMISSION remark to answer it with. Permissive mode logs and counts, and serves."""

    def __init__(self, mode: Mode, config: Callable[[], AccessConfig],
                 on_denied: Callable[[str, str, bool], None], *,
                 anonymous_reads: bool = False) -> None:
        self.enforcing = mode is Mode.ENFORCING
        self.config = config
        self.on_denied = on_denied  # (protocol, reason, served)
        self.anonymous_reads = anonymous_reads
        self.limiter = LogLimiter()

    def check(self, code: int, ext_fields: Mapping[str, str] | None, body: bytes | None,
              version: int, peer: str) -> tuple[str, str | None]:
        """(principal for the audit trail, refusal remark or None)."""
        v = decide(self.config(), code, ext_fields, body, version, peer,
                   anonymous_reads=self.anonymous_reads)
        if v.denied is None:
            return v.principal, None
        self.on_denied("remoting", v.reason, not self.enforcing)
        if self.limiter.allow(host_of(peer), v.reason, str(code)):
            log.warning("remoting request refused" if self.enforcing else
                        "remoting request would be refused (permissive)",
                        code=code, peer=peer, principal=v.principal, reason=v.denied)
        return v.principal, v.denied if self.enforcing else None
