"""Ports for Redis Cluster nodes started by the tests."""

from __future__ import annotations

import random
import socket


def cluster_port(taken: set[int]) -> int:
    """A free port whose cluster bus port (port + 10000) is free too, so at most 55535 - the
    usual ephemeral picks (free_port) are often above it and redis-server refuses them."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20_000, 55_535)
        if port in taken or port + 10_000 in taken:
            continue
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10_000))
        except OSError:
            continue
        taken.update((port, port + 10_000))
        return port
    raise RuntimeError("no free port pair for a Redis Cluster node")
