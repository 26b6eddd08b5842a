"""Worker settings: one dataclass, filled from flags, then ``NSFLEET_*`` variables, then
defaults."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path

import platformdirs

from nsfleet.domain import validation
from nsfleet.domain.java_properties import parse_properties


def default_data_dir() -> str:
    return str(Path(platformdirs.user_data_dir("nsfleet")) / "redis")


@dataclass(frozen=True, slots=True)
class Settings:
    redis_url: str = ""  # empty: start an embedded redis-server
    redis_username: str = ""  # used when the URL carries none
    redis_password: str = ""
    host: str = "0.0.0.0"
    http_port: int = 8080
    remoting_port: int = 9876
    metrics_port: int = 0  # 0: /metrics only on the HTTP port
    advertise_address: str = ""  # empty: the bind address, or the host's primary address
    processes: str = "1"  # worker processes sharing the ports (SO_REUSEPORT), or "auto"
    namespace: str = "default"
    # Move a store from the queue data's layout 1 to 2 once no older worker is alive ("auto"),
    # or keep it in layout 1 ("hold"): docs/table-shape.md, the move.
    layout_move: str = "auto"
    broker_timeout: float = 120.0  # seconds, for brokers that send no heartbeatTimeoutMillis
    sweep_interval: float = 10.0
    expiry_guard_share: float = 0.0  # 0: the mass-expiry guard is off
    expiry_guard_max_hold: float = 120.0  # seconds past its deadline the guard may hold a broker
    controller_elect_unclean: bool = False  # enableElectUncleanMaster (docs/controller.md)
    controller_port: int = 0  # 0: the controller answers on the remoting port only
    log_format: str = "console"
    log_level: str = "info"
    log_file: str = ""  # also log JSON lines to this file, rotated (empty: stderr only)
    drain_timeout: float = 10.0
    long_poll_max: float = 30.0
    max_body_size: int = 16 * 1024 * 1024
    max_frame_size: int = 16 * 1024 * 1024
    route_cache: bool = True
    # Store outages (docs/reliability.md): serve the last coherent view at most this long; 0
    # fails reads at once. 120 s is Java's broker timeout: past it Java would have expired a
    # broker that went silent when the store did, and the view cannot tell.
    stale_serve_max: float = 120.0
    min_replica_acks: int = 0  # writes wait (WAIT) until this many replicas have them
    replica_ack_timeout: float = 0.5  # seconds a write waits for its replica acks
    ui: bool = True  # the read-only console at /ui
    data_dir: str = ""
    namesrv_config_file: str = ""  # a Java NameServer's -c file (namesrv.properties)
    # TLS on the remoting port (docs/tls.md).
    tls_mode: str = "disabled"  # disabled, permissive (TLS and plaintext) or enforcing
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_ca_file: str = ""  # CAs that sign client certificates
    tls_client_auth: str = "none"  # none, optional or require
    tls_reload_interval: float = 10.0  # seconds between checks of the TLS files for changes
    # --- access control (docs/security.md) ---
    acl_mode: str = "off"  # off, permissive, enforcing
    acl_file: str = ""  # accounts, allowlists and HTTP tokens (plain_acl.yml's format)
    acl_reload_interval: float = 5.0
    acl_anonymous_reads: bool = False
    read_token_file: str = ""
    write_token_file: str = ""
    probe_token_file: str = ""
    http_proxy_protocol: bool = False
    trusted_proxies: str = ""  # comma-separated CIDRs / plain_acl.yml address patterns

    @property
    def embedded_redis(self) -> bool:
        return not self.redis_url

    @property
    def effective_data_dir(self) -> str:
        return self.data_dir or default_data_dir()

    def process_count(self) -> int:
        """``processes`` as a number: ``auto`` is the CPUs this process may use (its affinity,
        capped by a cgroup CPU quota, as a container's limit)."""
        if self.processes.strip().lower() == "auto":
            return usable_cpus()
        return int(self.processes)

    def validate(self) -> Settings:
        validation.namespace(self.namespace, "namespace")
        if self.processes.strip().lower() != "auto":
            try:
                count = int(self.processes)
            except ValueError:
                raise validation.ValidationError(
                    "processes", f"{self.processes!r} is not a number or auto") from None
            validation.integer(count, "processes", 1, 1024)
        if self.process_count() > 1:
            for name in ("http_port", "remoting_port"):
                if getattr(self, name) == 0:
                    raise validation.ValidationError(
                        name.replace("_", "-"), "must be a fixed port with --processes > 1 "
                        "(every process listens on it)")
        for name in ("http_port", "remoting_port"):
            validation.integer(getattr(self, name), name.replace("_", "-"), 0, 65535)
        validation.integer(self.metrics_port, "metrics-port", 0, 65535)
        if self.advertise_address.count(":") == 1:  # host:port (a bare IPv6 has several)
            validation.addr(self.advertise_address, "advertise-address")
        if self.layout_move not in ("auto", "hold"):
            raise validation.ValidationError("layout-move", "must be auto or hold")
        if self.log_format not in ("json", "console"):
            raise validation.ValidationError("log-format", "must be json or console")
        if self.log_level.lower() not in ("debug", "info", "warning", "error"):
            raise validation.ValidationError("log-level", "must be debug, info, warning or error")
        for name in ("broker_timeout", "sweep_interval", "expiry_guard_max_hold",
                     "replica_ack_timeout"):
            if getattr(self, name) <= 0:
                raise validation.ValidationError(name.replace("_", "-"), "must be > 0")
        if self.stale_serve_max < 0:
            raise validation.ValidationError("stale-serve-max", "must be >= 0 (0: off)")
        validation.integer(self.min_replica_acks, "min-replica-acks", 0, 16)
        if self.min_replica_acks and self.redis_url.startswith("redis+cluster://"):
            raise validation.ValidationError("min-replica-acks", "is not supported on a Redis "
                                             "Cluster (each master has its own replicas)")
        if not 0 <= self.expiry_guard_share <= 1:
            raise validation.ValidationError("expiry-guard-share", "must be between 0 and 1")
        for name in ("max_body_size", "max_frame_size"):
            validation.integer(getattr(self, name), name.replace("_", "-"), 1024)
        if self.acl_mode not in ("off", "permissive", "enforcing"):
            raise validation.ValidationError("acl-mode", "must be off, permissive or enforcing")
        if self.acl_mode != "off" and not self.acl_file:
            raise validation.ValidationError("acl-mode", "needs --acl-file (the accounts)")
        if self.acl_reload_interval <= 0:
            raise validation.ValidationError("acl-reload-interval", "must be > 0")
        if self.http_proxy_protocol and not self.trusted_proxies.strip():
            raise validation.ValidationError("http-proxy-protocol",
                                             "needs --trusted-proxies (whose headers to believe)")
        self._validate_tls()
        return self

    def _validate_tls(self) -> None:
        if self.tls_mode not in ("disabled", "permissive", "enforcing"):
            raise validation.ValidationError("tls-mode", "must be disabled, permissive or "
                                             "enforcing")
        if self.tls_client_auth not in ("none", "optional", "require"):
            raise validation.ValidationError("tls-client-auth", "must be none, optional or "
                                             "require")
        if self.tls_mode != "disabled":
            for name in ("tls_cert_file", "tls_key_file"):
                if not getattr(self, name):
                    raise validation.ValidationError(name.replace("_", "-"),
                                                     f"required with tls-mode {self.tls_mode}")
            if self.tls_client_auth != "none" and not self.tls_ca_file:
                raise validation.ValidationError("tls-ca-file", "required with tls-client-auth "
                                                 f"{self.tls_client_auth}")
        if self.tls_reload_interval <= 0:
            raise validation.ValidationError("tls-reload-interval", "must be > 0")

    @property
    def trusted_proxy_rules(self) -> list[str]:
        return [r.strip() for r in self.trusted_proxies.split(",") if r.strip()]

    def printable(self) -> dict[str, object]:
        """Effective settings with secrets masked (``serve --print-config``)."""
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "redis_password" and value:
                value = "***"
            if f.name == "redis_url" and "@" in value:
                scheme, _, rest = value.partition("://")
                value = f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
            out[f.name] = value
        out["data_dir"] = self.effective_data_dir if self.embedded_redis else self.data_dir
        return out


HELP = {
    "redis_url": "Redis URL (redis://, rediss://, unix://, redis+sentinel://host:port/service, "
                 "redis+cluster://host:port,host:port); empty starts an embedded redis-server",
    "redis_username": "Redis username, when the URL has none",
    "redis_password": "Redis password, when the URL has none",
    "host": "address the HTTP and remoting listeners bind",
    "http_port": "JSON HTTP API port",
    "remoting_port": "RocketMQ remoting (TCP) port",
    "metrics_port": "extra listener serving only /metrics (0 = off; /metrics is on the HTTP port)",
    "advertise_address": "remoting address (host or host:port; the remoting port when none) "
                         "the address server (GET /rocketmq/nsaddr) lists for this worker; "
                         "empty: the bind address, or the host's primary address when binding "
                         "0.0.0.0",
    "processes": "worker processes sharing the HTTP and remoting ports (SO_REUSEPORT) under a "
                 "supervisor that restarts a crashed one; a number or auto (one per usable "
                 "CPU); 1 runs the worker in this process",
    "namespace": "route-table namespace in Redis (one RocketMQ deployment)",
    "layout_move": "auto: move a store written before the queue data's layout 2 to it once no "
                   "worker of an older build is alive; hold: keep it in layout 1",
    "broker_timeout": "seconds before a silent broker expires, unless it sends its own timeout",
    "sweep_interval": "seconds between expiry sweeps",
    "expiry_guard_share": "hold a sweep that would expire more than this share of live brokers "
                          "(when more than 4 are live); 0 turns the guard off",
    "expiry_guard_max_hold": "seconds past its deadline the guard may hold a broker, at most",
    "controller_port": "also serve the controller's request codes (and only those) on this "
                       "port, for brokers whose controllerAddr names a port of its own (Java's "
                       "9878); 0: on the remoting port only",
    "controller_elect_unclean": "the controller may elect a master outside the in-sync replicas "
                                "when none of them is alive (enableElectUncleanMaster: messages "
                                "may be lost)",
    "log_format": "json or console",
    "log_level": "debug, info, warning or error",
    "log_file": "also write the logs (audit trail included) to this file as JSON lines, "
                "rotated at 50 MiB with 5 old files kept",
    "drain_timeout": "seconds in-flight requests get to finish after SIGTERM",
    "long_poll_max": "longest wait, in seconds, a route long-poll may ask for",
    "max_body_size": "largest HTTP request body, in bytes",
    "max_frame_size": "largest remoting frame, in bytes (the connection is closed above it)",
    "route_cache": "cache routes in the worker, invalidated through Redis pub/sub",
    "stale_serve_max": "seconds a worker may answer reads from its last coherent view while "
                       "Redis is away (marked stale); 0 fails them at once",
    "min_replica_acks": "writes wait (Redis WAIT) until this many replicas have them, and "
                        "answer an error when fewer do within replica-ack-timeout (0: off)",
    "replica_ack_timeout": "seconds a write waits for min-replica-acks",
    "data_dir": "embedded Redis data directory (its AOF, redis.log, redis.url, the port kept "
                "across restarts in redis.port, nsfleet.run while a worker owns it; a second "
                "worker on the same directory joins that Redis; docs/troubleshooting.md); "
                "empty: the user data directory's nsfleet/redis, which --print-config shows",
    "ui": "serve the read-only fleet console at /ui on the HTTP port",
    "namesrv_config_file": "a Java NameServer's properties file (mqnamesrv -c): its "
                           "listenPort, bindAddress and scanNotActiveBrokerInterval set this "
                           "worker's defaults, its NamesrvConfig keys are applied fleet-wide at "
                           "start; keys nsfleet does not implement are named and ignored",
    "tls_mode": "TLS on the remoting port: disabled, permissive (TLS and plaintext on one "
                "port) or enforcing (plaintext connections are closed)",
    "tls_cert_file": "PEM server certificate (chain) for the remoting port; reloaded on change",
    "tls_key_file": "PEM private key of tls-cert-file (unencrypted); reloaded on change",
    "tls_ca_file": "PEM CA certificates that sign client certificates; reloaded on change",
    "tls_client_auth": "client certificates: none, optional (verified when sent) or require",
    "tls_reload_interval": "seconds between checks of the TLS files for changes",
    "acl_mode": "remoting access control: off (anyone may send anything, as Java), permissive "
                "(verify signatures, log and count refusals, serve anyway) or enforcing",
    "acl_file": "accounts file (plain_acl.yml format: accounts, globalWhiteRemoteAddresses; "
                "plus HTTP tokens), re-read when it changes",
    "acl_reload_interval": "seconds between checks of the accounts and token files",
    "acl_anonymous_reads": "with access control on, serve unsigned read codes from anyone",
    "read_token_file": "file holding an HTTP bearer token with read scope (turns HTTP tokens on)",
    "write_token_file": "file holding an HTTP bearer token with write scope (turns HTTP "
                        "tokens on)",
    "probe_token_file": "file holding a token for /livez, /readyz and /metrics (else they stay "
                        "open)",
    "http_proxy_protocol": "accept a PROXY v1/v2 header on HTTP connections from "
                           "--trusted-proxies",
    "trusted_proxies": "comma-separated CIDRs/patterns of load balancers whose PROXY headers "
                       "are believed (both ports); empty with --acl-mode off: remoting believes "
                       "any peer's, as Java",
}


# serve --help's sections, in order, with the settings each holds: every setting is in exactly
# one (GROUP's keys are the settings; tests/unit/test_cli_help.py checks it covers them all).
START = "start-up"
GROUP_TITLES = ("ports and processes", "Redis", "broker expiry", "controller", "Redis outages",
                "requests", "logging", "access control", "TLS on the remoting port", START)
GROUP = {
    **dict.fromkeys(("host", "http_port", "remoting_port", "metrics_port", "advertise_address",
                     "processes"), "ports and processes"),
    **dict.fromkeys(("redis_url", "redis_username", "redis_password", "data_dir", "namespace",
                     "min_replica_acks", "replica_ack_timeout", "layout_move"), "Redis"),
    **dict.fromkeys(("broker_timeout", "sweep_interval", "expiry_guard_share",
                     "expiry_guard_max_hold"), "broker expiry"),
    **dict.fromkeys(("controller_port", "controller_elect_unclean"), "controller"),
    "stale_serve_max": "Redis outages",
    **dict.fromkeys(("drain_timeout", "long_poll_max", "max_body_size", "max_frame_size",
                     "route_cache", "ui"), "requests"),
    **dict.fromkeys(("log_format", "log_level", "log_file"), "logging"),
    **dict.fromkeys(("acl_mode", "acl_file", "acl_reload_interval", "acl_anonymous_reads",
                     "read_token_file", "write_token_file", "probe_token_file",
                     "http_proxy_protocol", "trusted_proxies"), "access control"),
    **dict.fromkeys(("tls_mode", "tls_cert_file", "tls_key_file", "tls_ca_file",
                     "tls_client_auth", "tls_reload_interval"), "TLS on the remoting port"),
    "namesrv_config_file": START,
}


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask (taskset, cpusets), capped by a cgroup v2
    CPU quota (a container's CPU limit), at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS has no affinity mask
        cpus = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, -(-int(quota) // int(period))))  # rounded up
    except (OSError, ValueError):
        pass
    return max(1, cpus)


def env_name(field_name: str) -> str:
    return "NSFLEET_" + field_name.upper()


def add_arguments(parser: argparse.ArgumentParser) -> dict[str, argparse._ArgumentGroup]:
    """One flag per setting, in its GROUP's section; unset flags fall back to the environment,
    then to the default. Returns the sections by title (the caller adds its own flags to
    them)."""
    defaults = Settings()
    groups = {title: parser.add_argument_group(title) for title in GROUP_TITLES}
    for f in fields(Settings):
        group = groups[GROUP[f.name]]
        flags = ["--" + f.name.replace("_", "-")]
        if f.name == "namesrv_config_file":
            flags.append("-c")  # mqnamesrv -c
        default = getattr(defaults, f.name)
        help_ = f"{HELP[f.name]} (env {env_name(f.name)}, default {default!r})"
        if isinstance(default, bool):
            group.add_argument(*flags, dest=f.name, default=None,
                               action=argparse.BooleanOptionalAction, help=help_)
        else:
            group.add_argument(*flags, dest=f.name, default=None, type=type(default),
                               help=help_)
    return groups


def _parse_env(raw: str, default: object, name: str) -> object:
    if isinstance(default, bool):
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise validation.ValidationError(name, f"{raw!r} is not a boolean")
    try:
        return type(default)(raw)
    except ValueError:
        kind = type(default).__name__
        raise validation.ValidationError(name, f"{raw!r} is not a valid {kind}") from None


# A Java NameServer's -c keys that set this worker's own settings: key -> (setting, conversion).
JAVA_WORKER_KEYS: dict[str, tuple[str, Callable[[str], object]]] = {
    "listenPort": ("remoting_port", int),
    "bindAddress": ("host", str),
    "scanNotActiveBrokerInterval": ("sweep_interval", lambda ms: int(ms) / 1000),
}


def read_namesrv_properties(path: str) -> dict[str, str]:
    """The file's Java Properties (ValidationError when it cannot be read)."""
    try:
        text = Path(path).read_text(encoding="latin-1")  # Properties.load(InputStream)
    except OSError as exc:
        raise validation.ValidationError("namesrv-config-file", str(exc)) from None
    try:
        return parse_properties(text)
    except ValueError as exc:
        raise validation.ValidationError("namesrv-config-file", str(exc)) from None


def load(args: argparse.Namespace | None = None,
         environ: Mapping[str, str] | None = None) -> Settings:
    """Flags, then ``NSFLEET_*`` variables, then a Java NameServer's -c file's worker keys, then
    the defaults."""
    environ = os.environ if environ is None else environ
    defaults = Settings()
    values: dict[str, object] = {}
    for f in fields(Settings):
        given = getattr(args, f.name, None) if args is not None else None
        if given is not None:
            values[f.name] = given
        elif env_name(f.name) in environ:
            values[f.name] = _parse_env(environ[env_name(f.name)], getattr(defaults, f.name),
                                        env_name(f.name))
    if values.get("namesrv_config_file"):
        props = read_namesrv_properties(str(values["namesrv_config_file"]))
        for key, (name, convert) in JAVA_WORKER_KEYS.items():
            if key in props and name not in values:
                try:
                    values[name] = convert(props[key].strip())
                except ValueError:
                    raise validation.ValidationError(
                        key, f"{props[key]!r} in {values['namesrv_config_file']}") from None
    return Settings(**values).validate()  # type: ignore[arg-type]
