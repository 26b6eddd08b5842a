"""``nsfleet simulate``'s command line: its options, their checks, and the summary it prints."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from dataclasses import asdict
from typing import Any

from rich.console import Console

from nsfleet.client.connection import (
    ConnectOptions,
    add_connection_options,
    remoting_options_given,
)
from nsfleet.client.http import DEFAULT_SERVER, SERVER_ENV
from nsfleet.client.remoting import parse_addrs
from nsfleet.simulate.brokers import Summary, simulate
from nsfleet.simulate.plan import Plan, make_plan

# What `nsfleet simulate --help` shows: plain text for a terminal.
DESCRIPTION = """\
Many simulated brokers against a fleet, for demos and load. Registers every broker of the
simulated deployment, keeps them heartbeating (--heartbeat is not clamped to RocketMQ's 10-60 s,
so a load test can beat faster than a real broker) until --duration elapses or Ctrl-C / SIGTERM,
then unregisters them all unless --keep.

Addresses are given as for nsfleet admin: --server URL[,URL] drives the brokers over the HTTP
API, -n host:9876[;host:9877] over the RocketMQ remoting protocol with the frames a real broker
sends (works against a Java NameServer too), with --tls* and signing (--access-key,
--secret-key-file). A progress display goes to stderr; --json prints a summary on stdout.
Exit status 1 when a broker could not register, 2 on a usage error."""


def _print_summary(console: Console, s: Summary) -> None:
    console.print(f"{s.registered}/{s.brokers} brokers registered "
                  f"({_plural(s.groups, 'group')}, {_plural(s.clusters, 'cluster')}, "
                  f"{_plural(s.topics, 'topic')} + {s.system_topics} "
                  f"system and retry topics) · {s.registrations} registrations"
                  f" · {s.heartbeats} heartbeats · {s.failovers} failovers · {s.errors} errors"
                  f" · {'kept registered' if s.kept else f'{s.unregistered} unregistered'}"
                  f" · {s.seconds:.1f} s", markup=False, highlight=False, soft_wrap=True)
    if s.first_error:
        console.print(f"first error: {s.first_error}", markup=False, highlight=False,
                      soft_wrap=True)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


async def _main(args: argparse.Namespace, plan: Plan, console: Console) -> Summary:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    handled = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        # Only possible on the main thread; elsewhere (tests) --duration ends the run.
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
    try:
        servers = args.server or os.environ.get(SERVER_ENV) or DEFAULT_SERVER
        opts = ConnectOptions.from_args(args)
        return await simulate(servers, plan, duration=args.duration, heartbeat=args.heartbeat,
                              keep=args.keep, request_timeout=args.timeout, stop=stop,
                              console=console, seed=args.seed,
                              token=opts.token, namesrv_addrs=args.namesrv_addr, tls=opts.tls,
                              credentials=opts.credentials)
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)
    try:
        if args.heartbeat <= 0 or (args.duration is not None and args.duration < 0):
            raise ValueError("--heartbeat must be > 0 and --duration >= 0")
        _check_addresses(args)
        plan = make_plan(args.brokers, args.topics, args.clusters,
                         slaves_every=args.slaves_every, spread=args.spread, seed=args.seed)
        summary = asyncio.run(_main(args, plan, console))
    except ValueError as exc:
        print(f"nsfleet simulate: {exc}", file=sys.stderr)
        return 2
    _print_summary(console, summary)
    if args.json:
        print(json.dumps(asdict(summary), indent=2, sort_keys=True))
    return 1 if summary.failed else 0


def _check_addresses(args: argparse.Namespace) -> None:
    """-n is remoting host:port, as in ``nsfleet admin``; a URL there was meant for --server."""
    remoting_only = remoting_options_given(args)
    if args.namesrv_addr is None:
        if remoting_only:
            raise ValueError(f"{', '.join(remoting_only)}: only with -n (remoting)")
        return
    if "://" in args.namesrv_addr:
        raise ValueError(f"-n/--namesrv-addr takes remoting addresses host:9876[;host:9876] (as "
                         f"admin -n); for a worker's HTTP URL use --server {args.namesrv_addr}")
    if args.server:
        raise ValueError("give --server (HTTP API) or -n/--namesrv-addr (remoting), not both")
    if args.token_file:
        raise ValueError("--token-file is for the HTTP API (--server); -n speaks remoting")
    if args.keep:
        raise ValueError("--keep cannot keep brokers driven over -n: a NameServer drops a broker "
                         "when its connection closes, as Java does; use --server to keep them")
    parse_addrs(args.namesrv_addr)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "simulate", help="run simulated brokers against a fleet", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    layout = p.add_argument_group("deployment", "the simulated brokers and topics")
    layout.add_argument("--brokers", type=int, default=4, metavar="N",
                        help="broker processes, masters and slaves (default 4)")
    layout.add_argument("--topics", type=int, default=20, metavar="M",
                        help="user topics TopicTest-<n> (default 20)")
    layout.add_argument("--clusters", type=int, default=1, metavar="C",
                        help="clusters (default 1)")
    layout.add_argument("--slaves-every", type=int, default=3, metavar="K",
                        help="every K-th broker group gets a slave (0: none; default 3)")
    layout.add_argument("--spread", type=int, default=3, metavar="K",
                        help="a topic is on 1..K broker groups (default 3)")
    layout.add_argument("--seed", type=int, default=0,
                        help="random seed of the layout (default 0)")
    running = p.add_argument_group("run")
    running.add_argument("--duration", type=float, default=None, metavar="S",
                         help="seconds to run (default: until Ctrl-C)")
    running.add_argument("--heartbeat", type=float, default=30.0, metavar="S",
                         help="seconds between a broker's heartbeats (default 30, not clamped)")
    running.add_argument("--keep", action="store_true",
                         help="leave the brokers registered at the end (they expire on their "
                              "own)")
    running.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    connection = p.add_argument_group("connection")
    connection.add_argument("--server", default=None, metavar="URL[,URL...]",
                            help=f"drive the brokers over the HTTP API of these worker URL(s), "
                                 f"comma-separated (env {SERVER_ENV}, default {DEFAULT_SERVER})")
    connection.add_argument("--namesrv-addr", "-n", default=None, metavar="HOST:PORT[;...]",
                            help="drive the brokers over the RocketMQ remoting protocol, as real "
                                 "brokers (REGISTER_BROKER, QUERY_DATA_VERSION, "
                                 "UNREGISTER_BROKER), to these NameServer addresses (admin's and "
                                 "mqadmin's -n)")
    add_connection_options(connection, signs_as="the brokers' requests, as a broker with "
                                                "aclEnable")
    p.set_defaults(func=run)
    return p
