"""``nsfleet admin copy-config --from -n java:9876``: copy what brokers do not re-send from one
name service into another: the KV config (ORDER_TOPIC_CONFIG, the namespaces an nsfleet HTTP
source lists, ``--kv-namespace``) and the NameServer config keys that change answers.

Dry run by default: shows what would change (keys put, keys deleted because the source lacks
them, config keys set). ``--apply`` writes them through the target's API, where each write is in
the worker's audit trail (``nsfleet.audit``, with the account and client address). Afterwards
``nsfleet admin diff`` finds the KV and config equal.

The source is ``--from SIDE``, or the ``-n`` addresses when ``--from`` has no value; the target
is ``--to SIDE``, else ``--server`` (an nsfleet fleet's HTTP API, the default)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from nsfleet.admin.diff import COMPARE_ERRORS, open_sides
from nsfleet.admin.snapshot import ANSWER_CONFIG
from nsfleet.client.connection import ConnectOptions
from nsfleet.client.http import DEFAULT_SERVER, SERVER_ENV
from nsfleet.client.name_service import NameService, kv_tables, open_name_service
from nsfleet.domain.model import ORDER_TOPIC_CONFIG

FROM_N = "<-n>"  # --from given without a value: the -n addresses are the source


@dataclass(frozen=True, slots=True)
class ConfigEdit:
    action: str  # put, delete (KV) or set (config)
    namespace: str  # "" for config
    key: str
    before: str | None  # the target's value
    after: str | None  # the source's value

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "namespace": self.namespace, "key": self.key,
                "before": self.before, "after": self.after}


def plan(source_kv: dict[str, dict[str, str] | None], target_kv: dict[str, dict[str, str] | None],
         source_config: dict[str, str], target_config: dict[str, str]) -> list[ConfigEdit]:
    """What makes the target's KV and answer-changing config equal to the source's."""
    changes: list[ConfigEdit] = []
    for ns in sorted(source_kv):
        src, dst = source_kv[ns] or {}, target_kv.get(ns) or {}
        for key in sorted(src.keys() | dst.keys()):
            if key not in src:
                changes.append(ConfigEdit("delete", ns, key, dst[key], None))
            elif src[key] != dst.get(key):
                changes.append(ConfigEdit("put", ns, key, dst.get(key), src[key]))
    for key, default in ANSWER_CONFIG.items():
        want, have = source_config.get(key, default), target_config.get(key, default)
        if want != have:
            changes.append(ConfigEdit("set", "", key, have, want))
    return changes


def _specs(args: argparse.Namespace) -> tuple[str, str]:
    source = args.source
    if source is None or source == FROM_N:
        source = getattr(args, "namesrv_addr", None)
        if not source:
            raise ValueError("give the source: --from SIDE, or --from -n HOST:9876")
    target = args.to or getattr(args, "server", None) or os.environ.get(SERVER_ENV) \
        or DEFAULT_SERVER
    return source, target


def _writer(args: argparse.Namespace, target: str) -> NameService:
    """The target, written one request at a time with every connection option (TLS too)."""
    return open_name_service(target, ConnectOptions.from_args(args))


async def apply(api: NameService, changes: list[ConfigEdit]) -> None:
    for change in changes:
        if change.action == "put":
            await api.kv_put(change.namespace, change.key, change.after or "")
        elif change.action == "delete":
            await api.kv_delete(change.namespace, change.key)
    config = {c.key: c.after or "" for c in changes if c.action == "set"}
    if config:
        await api.config_set(config)


async def _execute(args: argparse.Namespace) -> tuple[str, str, list[ConfigEdit]]:
    source_spec, target_spec = _specs(args)
    source, target = open_sides(args, [source_spec, target_spec])
    try:
        namespaces = {ORDER_TOPIC_CONFIG, *args.kv_namespace, *(await source.kv_namespaces() or [])}
        source_kv, target_kv = await asyncio.gather(kv_tables(source, namespaces),
                                                    kv_tables(target, namespaces))
        changes = plan(source_kv, target_kv, await source.config(), await target.config())
    finally:
        await source.close()
        await target.close()
    if args.apply and changes:
        writer = _writer(args, target_spec)
        try:
            await apply(writer, changes)
        finally:
            await writer.close()
    return source_spec, target_spec, changes


def _show(source: str, target: str, changes: list[ConfigEdit], applied: bool) -> list[Any]:
    head = Text(f"from {source}\ninto {target}\n")
    if not changes:
        return [head, Text("nothing to copy: the KV config and NameServer config are equal")]
    table = Table("Action", "Namespace", "Key", "Now", "Copied", title=Text(
        f"{len(changes)} changes {'applied' if applied else 'that --apply would make'}"))
    for c in changes:
        table.add_row(*(Text(x) for x in (c.action, c.namespace or "(config)", c.key,
                                          "(absent)" if c.before is None else c.before,
                                          "(deleted)" if c.after is None else c.after)))
    tail = Text("" if applied else "dry run: nothing written; --apply to write")
    return [head, table, tail]


def run(args: argparse.Namespace) -> int:
    try:
        source, target, changes = asyncio.run(_execute(args))
    except COMPARE_ERRORS as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"nsfleet admin copy-config: {message}", file=sys.stderr)
        return 1
    if getattr(args, "json", False):
        print(json.dumps({"from": source, "to": target, "applied": bool(args.apply),
                          "changes": [c.to_json() for c in changes]}, indent=2, sort_keys=True))
        return 0
    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 200)
    for renderable in _show(source, target, changes, args.apply):
        console.print(renderable)
    return 0


# What `nsfleet admin copy-config --help` shows: plain text for a terminal.
DESCRIPTION = """\
Copy what brokers do not re-send from one name service into another: the KV config
(ORDER_TOPIC_CONFIG, the namespaces an nsfleet HTTP source lists, --kv-namespace) and the
NameServer config keys that change answers.

Dry run by default: shows what would change (keys put, keys deleted because the source lacks
them, config keys set). --apply writes them through the target's API, where each write is in the
worker's audit trail (with the account and client address). Afterwards nsfleet admin diff finds
the KV and config equal.

The source is --from SIDE, or the -n addresses when --from has no value; the target is
--to SIDE, else --server (an nsfleet fleet's HTTP API, the default)."""


def add_parser(sub: Any, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    help_ = ("copy KV config and NameServer config (what brokers do not re-send) from one name "
             "service into another; dry run unless --apply")
    p: argparse.ArgumentParser = sub.add_parser(
        "copy-config", help=help_, description=DESCRIPTION, parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("--from", dest="source", nargs="?", const=FROM_N, metavar="SIDE",
                   help="the source: host:port[;host:port] or http://...; without a value, "
                        "the -n addresses")
    p.add_argument("--to", metavar="SIDE",
                   help="the target (default: --server, an nsfleet fleet's HTTP API)")
    p.add_argument("--apply", action="store_true", help="write the changes (default: show them)")
    p.add_argument("--kv-namespace", action="append", default=[], metavar="NS",
                   help="also copy this KV namespace (repeatable; a remoting source cannot "
                        "list its namespaces)")
    p.set_defaults(func=run, admin_command="copy-config")
    return p
