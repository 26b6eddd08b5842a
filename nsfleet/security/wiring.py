"""Access control assembled from the settings, for the worker: the reloadable files, the
remoting guard, the HTTP middleware and site, the trusted-proxy rules and the refusal counter.
Every part is None when its feature is off, so an unconfigured worker runs exactly as before."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from nsfleet.security.accounts import Scope
from nsfleet.security.addresses import AddressRules, BadAddressRule
from nsfleet.security.http_auth import ProxiedTCPSite, make_auth_middleware
from nsfleet.security.policy import Mode, RemotingGuard
from nsfleet.security.reloader import AccessFiles

if TYPE_CHECKING:
    from nsfleet.config import Settings


class SecurityConfigError(ValueError):
    pass


@dataclass
class Security:
    files: AccessFiles | None
    guard: RemotingGuard | None
    http_middleware: Any
    remoting_trusted: AddressRules | None  # None: PROXY headers believed from anyone (Java)
    http_trusted: AddressRules | None  # None: no PROXY protocol on HTTP

    def http_site(self, runner: web.BaseRunner, host: str, port: int, *,
                  reuse_port: bool = False) -> web.BaseSite:
        if self.http_trusted is not None:
            return ProxiedTCPSite(runner, host, port, self.http_trusted, reuse_port=reuse_port)
        return web.TCPSite(runner, host, port, reuse_port=reuse_port or None)


def build(settings: Settings, registry: CollectorRegistry) -> Security:
    mode = Mode(settings.acl_mode)
    try:
        trusted = AddressRules(settings.trusted_proxy_rules)
    except BadAddressRule as exc:
        raise SecurityConfigError(f"trusted-proxies: {exc}") from None
    token_files = {Scope.READ: settings.read_token_file, Scope.WRITE: settings.write_token_file,
                   Scope.PROBE: settings.probe_token_file}
    files = AccessFiles(settings.acl_file, token_files)
    denied = Counter("nsfleet_access_denied", "Requests refused by access control (served: "
                     "permissive mode counted them and served them)",
                     ["protocol", "reason", "served"], registry=registry)

    def on_denied(protocol: str, reason: str, served: bool) -> None:
        denied.labels(protocol, reason, "true" if served else "false").inc()

    def current() -> Any:
        return files.current

    guard = None
    if mode is not Mode.OFF:
        guard = RemotingGuard(mode, current, on_denied,
                              anonymous_reads=settings.acl_anonymous_reads)
    middleware = None
    if files.current.tokens:
        middleware = make_auth_middleware(current, enforcing=mode is not Mode.PERMISSIVE,
                                          on_denied=on_denied)
    remoting_trusted = trusted if (trusted or mode is not Mode.OFF) else None
    return Security(files if files.configured else None, guard, middleware, remoting_trusted,
                    trusted if settings.http_proxy_protocol else None)
