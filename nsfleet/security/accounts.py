"""The accounts file: RocketMQ's plain_acl.yml keys where they fit, plus nsfleet's HTTP tokens.

    globalWhiteRemoteAddresses: ["10.1.0.0/16", "192.168.0.*"]   # unsigned broker codes allowed
    accounts:
      - accessKey: rocketmq2
        secretKey: "12345678"
        admin: true                 # every request code
        whiteRemoteAddress: 10.2.0.*  # as Java: this AccessKey from here needs no signature
      - accessKey: broker-a
        secretKey: "..."
        broker: true                # nsfleet: the broker codes without admin
    tokens:                         # nsfleet: HTTP bearer tokens
      - {name: ci, token: "...", scope: write}
      - {name: grafana, token: "...", scope: read}
      - {name: kubelet, token: "...", scope: probe}

plain_acl.yml's topicPerms, groupPerms and defaultTopicPerm/defaultGroupPerm are broker-side
resources and are accepted and ignored; the NameServer has no topics to grant.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import yaml

from nsfleet.security.addresses import AddressRules, BadAddressRule, split_rules


class AccountsFileError(ValueError):
    """The accounts file cannot be used (the last good one stays)."""


class Scope(Enum):
    PROBE = "probe"  # /livez, /readyz, /metrics only
    READ = "read"
    WRITE = "write"  # implies read and probe


@dataclass(frozen=True, slots=True)
class Account:
    access_key: str
    secret_key: str
    admin: bool = False
    broker: bool = False
    white_remote_address: AddressRules = field(default_factory=lambda: AddressRules([]))


@dataclass(frozen=True, slots=True)
class Token:
    name: str
    scope: Scope


def token_digest(token: str) -> bytes:
    """Tokens are looked up by digest, so the lookup's timing says nothing of the token."""
    return hashlib.sha256(token.encode("utf-8")).digest()


@dataclass(frozen=True, slots=True)
class AccessConfig:
    """One consistent snapshot of accounts, allowlists and tokens."""

    accounts: dict[str, Account] = field(default_factory=dict)
    global_white: AddressRules = field(default_factory=lambda: AddressRules([]))
    tokens: dict[bytes, Token] = field(default_factory=dict)

    def token(self, presented: str) -> Token | None:
        return self.tokens.get(token_digest(presented))

    def unsigned_allowed(self, peer: str) -> str | None:
        """Who an unsigned request from ``peer`` counts as, when an allowlist holds its address:
        ``"global-allowlist"`` or the account whose whiteRemoteAddress matches."""
        if self.global_white.match(peer):
            return "global-allowlist"
        for account in self.accounts.values():
            if account.white_remote_address.match(peer):
                return account.access_key
        return None


def _str(entry: dict[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = entry.get(key)
    if value is None and not required:
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)  # secretKey: 12345678 in YAML is a number
    if not isinstance(value, str) or (required and not value):
        raise AccountsFileError(f"{where}.{key}: must be a non-empty string")
    return value


def _bool(entry: dict[str, Any], key: str, where: str) -> bool:
    value = entry.get(key, False)
    if not isinstance(value, bool):
        raise AccountsFileError(f"{where}.{key}: must be true or false")
    return value


def _list(doc: dict[str, Any], key: str) -> list[Any]:
    value = doc.get(key) or []
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise AccountsFileError(f"{key}: must be a list of mappings")
    return value


def parse(text: str) -> AccessConfig:
    """The accounts file's text as a snapshot; AccountsFileError names what is wrong."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AccountsFileError(f"not YAML: {exc}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise AccountsFileError("must be a mapping with accounts, tokens, "
                                "globalWhiteRemoteAddresses")
    try:
        global_white = AddressRules(split_rules(doc.get("globalWhiteRemoteAddresses"),
                                                "globalWhiteRemoteAddresses"))
        accounts: dict[str, Account] = {}
        for i, entry in enumerate(_list(doc, "accounts")):
            where = f"accounts[{i}]"
            ak = _str(entry, "accessKey", where)
            if not ak.strip():  # an empty AccessKey is how an unsigned client signs
                raise AccountsFileError(f"{where}.accessKey: must be a non-empty string")
            if ak in accounts:
                raise AccountsFileError(f"{where}.accessKey: {ak!r} appears twice")
            white = AddressRules(split_rules(entry.get("whiteRemoteAddress"),
                                             f"{where}.whiteRemoteAddress"))
            accounts[ak] = Account(ak, _str(entry, "secretKey", where),
                                   admin=_bool(entry, "admin", where),
                                   broker=_bool(entry, "broker", where),
                                   white_remote_address=white)
    except BadAddressRule as exc:
        raise AccountsFileError(str(exc)) from None
    tokens: dict[bytes, Token] = {}
    for i, entry in enumerate(_list(doc, "tokens")):
        where = f"tokens[{i}]"
        scope = entry.get("scope", "read")
        if scope not in {s.value for s in Scope}:
            raise AccountsFileError(f"{where}.scope: must be read, write or probe")
        add_token(tokens, _str(entry, "token", where), Token(_str(entry, "name", where),
                                                             Scope(scope)), where)
    return AccessConfig(accounts, global_white, tokens)


def add_token(tokens: dict[bytes, Token], secret: str, token: Token, where: str) -> None:
    if len(secret) < 16:
        raise AccountsFileError(f"{where}: a token needs at least 16 characters")
    digest = token_digest(secret)
    if digest in tokens:
        raise AccountsFileError(f"{where}: the same token is given twice")
    tokens[digest] = token
