"""Address rules as plain_acl.yml writes them (RemoteAddressStrategyFactory): ``*``, an exact
address, ``192.168.0.*`` / ``192.168.*.*``, a range ``192.168.0.1-10``, a set
``192.168.0.{1,2,3}``; plus CIDR (``10.0.0.0/8``, IPv6 too). Used for the unsigned-broker
allowlists and the trusted-proxy list."""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class BadAddressRule(ValueError):
    pass


def host_of(peer: str) -> str:
    """The host part of ``ip:port`` / ``[v6]:port`` (a bare address is returned as is)."""
    if peer.startswith("["):
        return peer[1:peer.index("]")] if "]" in peer else peer
    if peer.count(":") == 1:
        return peer.rsplit(":", 1)[0]
    return peer


@functools.lru_cache(maxsize=4096)  # a worker sees the same few thousand peers again and again
def _parse_ip(host: str) -> IPAddress | None:
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped  # a dual-stack socket's view of an IPv4 client
    return ip


def _segment(text: str, rule: str) -> frozenset[int] | None:
    """One dotted IPv4 segment as the set of values it allows (None: any)."""
    if text == "*":
        return None
    try:
        if text.startswith("{") and text.endswith("}"):
            values = {int(v) for v in text[1:-1].split(",")}
        elif "-" in text:
            low, high = (int(v) for v in text.split("-", 1))
            values = set(range(low, high + 1))
        else:
            values = {int(text)}
    except ValueError:
        raise BadAddressRule(f"{rule!r}: bad segment {text!r}") from None
    if not values or min(values) < 0 or max(values) > 255:
        raise BadAddressRule(f"{rule!r}: segment {text!r} out of 0-255")
    return frozenset(values)


class AddressRules:
    """A list of rules; :meth:`match` is true when any rule matches the peer's address."""

    def __init__(self, rules: Iterable[str]) -> None:
        self.rules = [r.strip() for r in rules if r and r.strip()]
        self._any = False
        self._networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        self._dotted: list[tuple[frozenset[int] | None, ...]] = []
        for rule in self.rules:
            if rule in ("*", "*.*.*.*"):
                self._any = True
                continue
            try:
                self._networks.append(ipaddress.ip_network(rule, strict=False))
                continue
            except ValueError:
                pass
            parts = rule.split(".")
            if len(parts) != 4:
                raise BadAddressRule(f"{rule!r} is neither an address, a CIDR nor a dotted "
                                     "IPv4 pattern")
            self._dotted.append(tuple(_segment(p, rule) for p in parts))

    def __bool__(self) -> bool:
        return bool(self.rules)

    def match(self, peer: str) -> bool:
        if self._any:
            return True
        if not self.rules:
            return False
        ip = _parse_ip(host_of(peer))
        if ip is None:
            return False
        if any(ip in net for net in self._networks):
            return True
        if isinstance(ip, ipaddress.IPv4Address):
            octets = ip.packed
            return any(all(seg is None or octets[i] in seg for i, seg in enumerate(pattern))
                       for pattern in self._dotted)
        return False


def split_rules(value: object, where: str) -> list[str]:
    """A YAML value holding rules: a list, or one string (comma-separated, as Java's
    whiteRemoteAddress may be written)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [p for p in (s.strip() for s in value.split(",")) if p] if "{" not in value \
            else [value.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise BadAddressRule(f"{where}: must be a string or a list of strings")
