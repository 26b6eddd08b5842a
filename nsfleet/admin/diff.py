"""``nsfleet admin diff A B``: does one name service answer what another answers? Each side is
remoting addresses (a Java NameServer, Java replicas, nsfleet workers) or an nsfleet HTTP URL.

Reads cluster info, the whole topic list, every topic's route, the KV namespaces either side
holds (ORDER_TOPIC_CONFIG, those an nsfleet HTTP side lists, and ``--kv-namespace``) and the
NameServer config keys that change answers, then reports each difference by kind, broker group
and field, with the topics it appears in. A difference is re-read after ``--settle`` seconds and
reported only if it is still there (a broker registering mid-run is no difference).

``--bytes`` (remoting sides only) also asks both sides the same requests and reports where the
raw answers differ (admin/byte_diff.py), as a client of ``--client-version``; that report never
changes the exit status.

Exit status: 0 equal, 1 different, 2 could not compare (one line on stderr)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from nsfleet.admin.byte_diff import RawDifference, byte_differences
from nsfleet.admin.snapshot import (
    ANSWER_CONFIG,
    Difference,
    compare,
    read_snapshot,
    touched_topics,
)
from nsfleet.client.connection import ConnectOptions, is_http
from nsfleet.client.http import ApiError, FleetUnavailable
from nsfleet.client.name_service import NameService, open_name_service
from nsfleet.client.remoting import RemotingUnavailable
from nsfleet.client.remoting_name_service import RemotingNameService
from nsfleet.domain.model import ORDER_TOPIC_CONFIG
from nsfleet.wire.codec import CURRENT_VERSION

DEFAULT_SETTLE = 5.0
DEFAULT_TIMEOUT = 10.0
EQUAL, DIFFERENT, NOT_COMPARED = 0, 1, 2


@dataclass
class DiffResult:
    a: str
    b: str
    differences: list[Difference]
    settled: int  # differences seen in the first read and gone after --settle
    compared: dict[str, int]
    seconds: float
    raw: list[RawDifference] | None = None  # --bytes

    def to_json(self) -> dict[str, Any]:
        out = {"equal": not self.differences, "a": self.a, "b": self.b,
               "differences": [d.to_json() for d in self.differences],
               "settled": self.settled, "compared": self.compared,
               "seconds": round(self.seconds, 3)}
        if self.raw is not None:
            out["bytes"] = [d.to_json() for d in self.raw]
        return out


class _Bar:
    """Routes read, on a terminal: a progress bar on stderr; elsewhere nothing."""

    def __init__(self, enabled: bool) -> None:
        self.progress = Progress(TextColumn("reading routes"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=Console(file=sys.stderr),
                                 transient=True, disable=not enabled)
        self.task = self.progress.add_task("routes", total=0)

    def add_total(self, count: int) -> None:
        total = self.progress.tasks[0].total or 0
        self.progress.update(self.task, total=total + count)

    def advance(self, count: int) -> None:
        self.progress.advance(self.task, count)

    @contextlib.contextmanager
    def shown(self) -> Iterator[None]:
        with self.progress:
            yield


async def _namespaces(sides: tuple[NameService, NameService], extra: list[str]) -> set[str]:
    names = {ORDER_TOPIC_CONFIG, *extra}
    for side in sides:
        listed = await side.kv_namespaces()
        names.update(listed or [])
    return names


async def run_diff(a: NameService, b: NameService, *, settle: float,
                   kv_namespaces: list[str] | None = None, bar: _Bar | None = None) -> DiffResult:
    """Compare two name services (errors of either side propagate)."""
    bar = bar or _Bar(False)
    started = time.monotonic()
    namespaces = await _namespaces((a, b), kv_namespaces or [])
    with bar.shown():
        first = await asyncio.gather(
            *(read_snapshot(side, namespaces, bar.advance, on_total=bar.add_total)
              for side in (a, b)))
    diffs = compare(*first, namespaces)
    settled = 0
    if diffs and settle > 0:
        await asyncio.sleep(settle)
        topics = touched_topics(diffs)
        again = await asyncio.gather(
            *(read_snapshot(side, namespaces, bar.advance, topics=topics) for side in (a, b)))
        seen = {d.identity for d in diffs}
        still = [d for d in compare(*again, namespaces, topics) if d.identity in seen]
        settled = len(seen - {d.identity for d in still})
        diffs = still
    sa = first[0]
    compared = {"topics": len(first[0].topics | first[1].topics),
                "brokerGroups": len(set(sa.cluster_info.get("brokerAddrTable") or {})
                                    | set(first[1].cluster_info.get("brokerAddrTable") or {})),
                "kvNamespaces": len(namespaces), "configKeys": len(ANSWER_CONFIG)}
    return DiffResult(a.label, b.label, diffs, settled, compared, time.monotonic() - started)


def _text(value: Any) -> str:
    return "(absent)" if value is None else str(value)


def _topics_text(topics: list[str], shown: int = 5) -> str:
    more = f" … ({len(topics)})" if len(topics) > shown else ""
    return ", ".join(topics[:shown]) + more


def render(result: DiffResult) -> list[Any]:
    head = Text(f"A = {result.a}\nB = {result.b}\n")
    summary = (f"{result.compared['topics']} topics, {result.compared['brokerGroups']} broker "
               f"groups, {result.compared['kvNamespaces']} KV namespaces, "
               f"{result.compared['configKeys']} config keys compared in {result.seconds:.1f} s")
    if not result.differences:
        return [head, Text(f"equal: {summary}")]
    table = Table("Kind", "Group", "Field", "A", "B", "Topics",
                  title=Text(f"{len(result.differences)} differences"))
    for d in result.differences:
        table.add_row(*(Text(c) for c in (
            d.kind, d.group, d.field, " / ".join(_text(v.left) for v in d.variants),
            " / ".join(_text(v.right) for v in d.variants), _topics_text(d.topics))))
    settled = f"; {result.settled} more settled within the re-read" if result.settled else ""
    return [head, table, Text(f"{summary}{settled}")]


def render_raw(raw: list[RawDifference]) -> list[Any]:
    if not raw:
        return [Text("bytes: every answer identical")]
    table = Table("Request", "Part", "A", "B", "Order only",
                  title=Text(f"{len(raw)} raw differences (the exit status ignores them)"))
    for d in raw:
        table.add_row(*(Text(c) for c in (d.request, d.part, d.left, d.right,
                                          "yes" if d.order_only else "")))
    return [table]


def sides_of(args: argparse.Namespace) -> list[str]:
    """The sides given: -n first, the positional ones, --server last (two in all)."""
    n, server = getattr(args, "namesrv_addr", None), getattr(args, "server", None)
    return [*([n] if n else []), *args.sides, *([server] if server else [])]


def open_sides(args: argparse.Namespace, specs: list[str]) -> list[NameService]:
    """Each side for reading it whole (remoting requests pipelined)."""
    opts = ConnectOptions.from_args(args, default_timeout=DEFAULT_TIMEOUT)
    return [open_name_service(s, opts, bulk=True) for s in specs]


async def _execute(args: argparse.Namespace, specs: list[str]) -> DiffResult:
    a, b = open_sides(args, specs)
    bar = _Bar(sys.stderr.isatty() and not getattr(args, "json", False))
    try:
        result = await run_diff(a, b, settle=args.settle, kv_namespaces=args.kv_namespace,
                                bar=bar)
        if getattr(args, "bytes", False):
            if not (isinstance(a, RemotingNameService) and isinstance(b, RemotingNameService)):
                raise ValueError("--bytes compares remoting answers: give two host:port sides")
            info = await a.cluster_info()
            result.raw = await byte_differences(
                a, b, topics=set(await a.topics()) | set(await b.topics()),
                clusters=(info.get("clusterAddrTable") or {}).keys(),
                namespaces=await _namespaces((a, b), args.kv_namespace),
                version=args.client_version)
        return result
    finally:
        await a.close()
        await b.close()


# Unreachable, refusing, or answering JSON that is no NameServer's (KeyError, TypeError).
COMPARE_ERRORS = (RemotingUnavailable, FleetUnavailable, ApiError, ValueError, KeyError,
                  TypeError)


def run(args: argparse.Namespace) -> int:
    specs = sides_of(args)
    if len(specs) != 2:
        print(f"nsfleet admin diff: give two name services (remoting host:port[;host:port] or "
              f"an nsfleet http:// URL, with -n and --server counted), not {len(specs)}",
              file=sys.stderr)
        return NOT_COMPARED
    if getattr(args, "bytes", False) and any(is_http(s) for s in specs):
        print("nsfleet admin diff: --bytes compares remoting answers: give two host:port sides",
              file=sys.stderr)
        return NOT_COMPARED
    try:
        result = asyncio.run(_execute(args, specs))
    except COMPARE_ERRORS as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"nsfleet admin diff: could not compare: {message}", file=sys.stderr)
        return NOT_COMPARED
    if getattr(args, "json", False):
        print(json.dumps(result.to_json(), indent=2, sort_keys=True))
    else:
        console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 200)
        for renderable in render(result) + (render_raw(result.raw)
                                             if result.raw is not None else []):
            console.print(renderable)
    return DIFFERENT if result.differences else EQUAL


# What `nsfleet admin diff --help` shows: plain text for a terminal.
DESCRIPTION = """\
Does one name service answer what another answers? Each side is remoting addresses (a Java
NameServer, Java replicas, nsfleet workers) or an nsfleet HTTP URL.

Reads cluster info, the whole topic list, every topic's route, the KV namespaces either side
holds (ORDER_TOPIC_CONFIG, those an nsfleet HTTP side lists, and --kv-namespace) and the
NameServer config keys that change answers, then reports each difference by kind, broker group
and field, with the topics it appears in. A difference is re-read after --settle seconds and
reported only if it is still there (a broker registering mid-run is no difference).

--bytes (remoting sides only) also asks both sides the same requests and reports where the raw
answers differ, as a client of --client-version; that report never changes the exit status.

Exit status: 0 equal, 1 different, 2 could not compare (one line on stderr)."""


def add_parser(sub: Any, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    help_ = ("compare two name services (Java NameServers, nsfleet over remoting or HTTP): "
             "exit 0 equal, 1 different, 2 could not compare")
    p: argparse.ArgumentParser = sub.add_parser("diff", help=help_, description=DESCRIPTION,
                                                parents=[common], allow_abbrev=False,
                                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sides", nargs="*", metavar="SIDE",
                   help="host:port[;host:port] (remoting) or http://host:8080 (nsfleet HTTP); "
                        "-n and --server count as sides too: two in all")
    p.add_argument("--settle", type=float, default=DEFAULT_SETTLE, metavar="S",
                   help=f"re-read a difference after S seconds before reporting it (default "
                        f"{DEFAULT_SETTLE:g}; 0: report the first read)")
    p.add_argument("--kv-namespace", action="append", default=[], metavar="NS",
                   help="also compare this KV namespace (repeatable; a remoting side cannot "
                        "list its namespaces)")
    p.add_argument("--bytes", action="store_true",
                   help="also report where the raw remoting answers differ byte by byte (code, "
                        "remark, header version, extFields, body); never changes the exit status")
    p.add_argument("--client-version", type=int, default=CURRENT_VERSION, metavar="V",
                   help=f"--bytes asks as a client of this MQVersion ordinal (default "
                        f"{CURRENT_VERSION}, 5.3.3; 409: 4.9.8)")
    p.set_defaults(func=run, admin_command="diff")
    return p
