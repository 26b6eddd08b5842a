"""Before ``nsfleet serve`` starts anything (the embedded Redis, worker processes): its listening
ports are free, or one error naming the flag that sets the taken one."""

from __future__ import annotations

import socket

from nsfleet.config import Settings, env_name

PORTS = (("http_port", "--http-port"), ("remoting_port", "--remoting-port"),
         ("metrics_port", "--metrics-port"), ("controller_port", "--controller-port"))


class PortTaken(RuntimeError):
    pass


def check_free(settings: Settings) -> None:
    """Bind each fixed port as the listeners will (SO_REUSEADDR, every address of the host, no
    SO_REUSEPORT: a listener already there, even one of ours, makes it taken)."""
    for name, flag in PORTS:
        port = int(getattr(settings, name))
        if not port:  # 0: any free port (the metrics port: none)
            continue
        try:
            infos = socket.getaddrinfo(settings.host or None, port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
        except socket.gaierror as exc:
            raise PortTaken(f"--host {settings.host}: {exc}") from None
        for family, kind, proto, _, address in infos:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                try:
                    probe.bind(address)
                except OSError as exc:
                    raise PortTaken(
                        f"{flag} {port}: {address[0]}:{port} is taken ({exc.strerror}); stop "
                        f"what listens there or choose another port with {flag} (or "
                        f"{env_name(name)})") from None
