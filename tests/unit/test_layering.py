"""The layers stay where docs/architecture.md puts them: this test fails when a module imports
past its layer.

  front ends (nsfleet/http, nsfleet/remoting)  ->  service (nsfleet/service)  ->  store
  (nsfleet/store)  ->  Redis; every layer may use the domain (nsfleet/domain), which uses only
  the plumbing of nsfleet/runtime (which uses nothing),
  and the wire format (nsfleet/wire), which uses only the domain. The clients (nsfleet/client,
  nsfleet/admin, the simulator) reach a fleet over the wire only: they never import the server.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "nsfleet"
REDIS = ("redis", "fakeredis", "nsfleet.redis_conn", "nsfleet.redis_server", "nsfleet.embedded")
# What a client of a fleet must never import: the server's packages and process wiring.
SERVER = ("nsfleet.http", "nsfleet.remoting", "nsfleet.service", "nsfleet.store",
          "nsfleet.security", "nsfleet.worker", "nsfleet.supervisor", "nsfleet.process_group",
          "nsfleet.config", *REDIS)
# Layer -> module prefixes it must not import.
FORBIDDEN = {
    "http": ("nsfleet.store", *REDIS),
    "remoting": ("nsfleet.store", *REDIS),
    "service": ("nsfleet.store.keys", "nsfleet.store.scripts", "nsfleet.http", "nsfleet.remoting",
                "nsfleet.config", "nsfleet.security", *REDIS),
    "domain": ("nsfleet.store", "nsfleet.service", "nsfleet.http", "nsfleet.remoting",
               "nsfleet.wire", "nsfleet.security", "nsfleet.client", "nsfleet.admin",
               "nsfleet.config", "nsfleet.metrics", "aiohttp", *REDIS),
    # The wire format serves server and clients alike, so it knows neither.
    "wire": ("nsfleet.store", "nsfleet.service", "nsfleet.http", "nsfleet.remoting",
             "nsfleet.security", "nsfleet.client", "nsfleet.admin", "nsfleet.config",
             "nsfleet.metrics", "aiohttp", *REDIS),
    # Plumbing every layer uses, so it uses none of them.
    "runtime": ("nsfleet.domain", "nsfleet.wire", "nsfleet.store", "nsfleet.service",
                "nsfleet.http", "nsfleet.remoting", "nsfleet.security", "nsfleet.client",
                "nsfleet.admin", "nsfleet.config", "nsfleet.metrics", *REDIS),
    "client": SERVER,
    "admin": SERVER,
    # The simulator reaches a fleet as brokers do, over the wire.
    "simulate": SERVER,
    "store": ("nsfleet.service", "nsfleet.http", "nsfleet.remoting", "nsfleet.security"),
    # Analytics reads the tables straight from Redis with Spark: it may know the key schema
    # (store.keys), where the embedded Redis runs (config, embedded) and the domain, never
    # the server's parts or the store's code.
    "analytics": ("nsfleet.store", "nsfleet.service", "nsfleet.http", "nsfleet.remoting",
                  "nsfleet.security", "nsfleet.client", "nsfleet.admin", "nsfleet.worker",
                  "nsfleet.supervisor", "nsfleet.process_group", "nsfleet.wire"),
    # Access control serves both front ends (the PROXY parser is top-level for that reason).
    "security": ("nsfleet.store", "nsfleet.service", "nsfleet.http", "nsfleet.remoting", *REDIS),
}


def imports(path: Path, root: Path) -> set[str]:
    """Every module ``path`` (a file under the package ``root``) imports, relative imports
    resolved."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(root.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


# Layer -> modules it may import although FORBIDDEN names their package.
ALLOWED = {"analytics": ("nsfleet.store.keys",)}


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def violations(layer: str, root: Path = PACKAGE) -> list[str]:
    bad = []
    for path in sorted((root / layer).rglob("*.py")):
        for module in sorted(imports(path, root)):
            if _within(module, FORBIDDEN[layer]) and not _within(module,
                                                                 ALLOWED.get(layer, ())):
                bad.append(f"{path.relative_to(root.parent)} imports {module}")
    return bad


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_nothing_past_it(layer: str) -> None:
    assert (PACKAGE / layer).is_dir()
    assert violations(layer) == []


def test_front_ends_reach_no_store_attribute() -> None:
    """Front ends hold the NameServer only: no ``.store``, ``.redis`` or ``.keys`` attribute
    access, whatever they imported."""
    bad = []
    for layer in ("http", "remoting"):
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr in ("store", "_store", "redis",
                                                                     "keys", "cache", "_cache"):
                    bad.append(f"{path.name}:{node.lineno} .{node.attr}")
    assert bad == []


def test_the_contract_catches_a_violation(tmp_path: Path) -> None:
    """The checker itself: a front-end module importing the store is reported."""
    (tmp_path / "nsfleet" / "http").mkdir(parents=True)
    probe = tmp_path / "nsfleet" / "http" / "probe.py"
    probe.write_text("from nsfleet.store import RouteStore\nfrom ..store import keys\n"
                     "import redis.asyncio\nfrom nsfleet.domain import model\n")
    assert violations("http", tmp_path / "nsfleet") == [
        "nsfleet/http/probe.py imports nsfleet.store",
        "nsfleet/http/probe.py imports nsfleet.store.RouteStore",
        "nsfleet/http/probe.py imports nsfleet.store.keys",
        "nsfleet/http/probe.py imports redis.asyncio",
    ]

