"""``nsfleet simulate``: many simulated brokers against a fleet, for demos and load.

Registers every broker of :mod:`nsfleet.simulate_plan`, keeps them heartbeating (``--heartbeat``
is not clamped to RocketMQ's 10-60 s, so a load test can beat faster than a real broker) until
``--duration`` elapses or Ctrl-C / SIGTERM, then unregisters them all unless ``--keep``. The
addresses are named as ``nsfleet admin`` names them: ``--server URL[,URL]`` drives the brokers
over the HTTP API (BrokerAgent), ``-n host:9876[;host:9877]`` over the RocketMQ remoting
protocol with the frames a real broker sends (RemotingBrokerAgent; works against a Java
NameServer too), with admin's ``--tls*`` and signing (``--access-key``, ``--secret-key-file``)
options. A rich progress display goes to stderr; ``--json`` prints a summary on stdout.
Exit status 1 when a broker could not register.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import ssl
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from nsfleet.client.broker_agent import BrokerAgent
from nsfleet.client.broker_loop import BrokerLoop
from nsfleet.client.connection import (
    ConnectOptions,
    add_connection_options,
    remoting_options_given,
)
from nsfleet.client.http import DEFAULT_SERVER, SERVER_ENV
from nsfleet.client.remoting import parse_addrs
from nsfleet.client.remoting_broker import RemotingBrokerAgent
from nsfleet.simulate_plan import Plan, make_plan

START_CONCURRENCY = 32  # registrations in flight while starting
REFRESH = 0.2  # seconds between display updates
Agent = BrokerLoop


@dataclass(slots=True)
class Summary:
    brokers: int
    groups: int
    clusters: int
    topics: int  # the --topics user topics TopicTest-<n>
    system_topics: int  # each group's system topics, and the user topics' retry topics
    registered: int = 0
    failed: int = 0
    registrations: int = 0
    heartbeats: int = 0
    errors: int = 0  # failed registrations at start and failed heartbeat cycles
    failovers: int = 0
    unregistered: int = 0
    kept: bool = False
    seconds: float = 0.0
    first_error: str | None = None


def _counts(agents: list[Agent]) -> str:
    regs = sum(a.stats.registrations for a in agents)
    beats = sum(a.stats.heartbeats for a in agents)
    errors = sum(a.stats.errors for a in agents)
    failovers = sum(a.failovers for a in agents)
    return (f"registrations {regs} · heartbeats {beats} · failovers {failovers} · "
            f"errors {errors}")


async def _start_all(agents: list[Agent], progress: Progress, task: TaskID,
                     summary: Summary) -> list[Agent]:
    gate = asyncio.Semaphore(START_CONCURRENCY)

    async def start(agent: BrokerAgent) -> bool:
        async with gate:
            try:
                await agent.start()
            except Exception as exc:
                summary.failed += 1
                summary.first_error = summary.first_error or str(exc)
                return False
            finally:
                progress.advance(task)
            return True

    started = await asyncio.gather(*(start(a) for a in agents))
    return [a for a, ok in zip(agents, started, strict=True) if ok]


async def _wait(stop: asyncio.Event, duration: float | None, agents: list[Agent],
                progress: Progress, task: TaskID) -> None:
    loop = asyncio.get_running_loop()
    began = loop.time()
    while not stop.is_set():
        elapsed = loop.time() - began
        if duration is not None and elapsed >= duration:
            break
        progress.update(task, completed=elapsed if duration else None,
                        description=f"running ({_counts(agents)})")
        timeout = REFRESH if duration is None else min(REFRESH, duration - elapsed)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(timeout, 0.001))
    # Stopped early (Ctrl-C), the bar stays where the run got to instead of jumping to the end.
    ran = loop.time() - began
    progress.update(task, completed=min(ran, duration) if duration else None,
                    description=f"{'stopped' if stop.is_set() else 'ran'} ({_counts(agents)})")


async def simulate(servers: str, plan: Plan, *, duration: float | None, heartbeat: float,
                   keep: bool, request_timeout: float, stop: asyncio.Event,
                   console: Console, seed: int = 0, token: str | None = None,
                   namesrv_addrs: str | None = None, tls: ssl.SSLContext | None = None,
                   credentials: tuple[str, str] | None = None) -> Summary:
    """Over the HTTP API of ``servers``, or over remoting to ``namesrv_addrs`` when given
    (with ``tls`` and signed with ``credentials``, when given)."""
    summary = Summary(len(plan.brokers), plan.groups, len(plan.clusters),
                      len(plan.user_topics), len(plan.topics) - len(plan.user_topics),
                      kept=keep)
    began = time.monotonic()
    rng = random.Random(seed)
    connector = aiohttp.TCPConnector(limit=64)
    async with aiohttp.ClientSession(connector=connector) as session:
        # Random first beats and start positions spread the load over time and workers, as
        # brokers started at different moments with shuffled namesrv lists would.
        agents: list[Agent] = [
            RemotingBrokerAgent(namesrv_addrs, b.identity, b.topics, heartbeat_interval=heartbeat,
                                initial_delay=rng.uniform(0, heartbeat),
                                request_timeout=request_timeout, shuffle=True, tls=tls,
                                credentials=credentials)
            if namesrv_addrs else
            BrokerAgent(servers, b.identity, b.topics, heartbeat_interval=heartbeat,
                        interval_bounds=None, initial_delay=rng.uniform(0, heartbeat),
                        request_timeout=request_timeout, session=session, shuffle=True,
                        token=token)
            for b in plan.brokers]
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console) as progress:
            reg = progress.add_task("registering", total=len(agents))
            started = await _start_all(agents, progress, reg, summary)
            summary.registered = len(started)
            if started and not stop.is_set():
                run = progress.add_task("running", total=duration)
                await _wait(stop, duration, started, progress, run)
            unreg = progress.add_task("unregistering" if not keep else "stopping (--keep)",
                                      total=len(started))

            async def close(agent: Agent) -> bool:
                try:
                    return await agent.close(unregister=not keep)  # --keep is refused with -n
                finally:
                    progress.advance(unreg)

            closed = await asyncio.gather(*(close(a) for a in started))
    summary.unregistered = sum(closed)
    summary.registrations = sum(a.stats.registrations for a in agents)
    summary.heartbeats = sum(a.stats.heartbeats for a in agents)
    summary.errors = summary.failed + sum(a.stats.errors for a in agents)
    summary.failovers = sum(a.failovers for a in agents)
    summary.seconds = round(time.monotonic() - began, 3)
    return summary


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
        "simulate", help="run simulated brokers against a fleet", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--brokers", type=int, default=4, metavar="N",
                   help="broker processes, masters and slaves (default 4)")
    p.add_argument("--topics", type=int, default=20, metavar="M",
                   help="user topics TopicTest-<n> (default 20)")
    p.add_argument("--clusters", type=int, default=1, metavar="C", help="clusters (default 1)")
    p.add_argument("--server", default=None, metavar="URL[,URL...]",
                   help=f"drive the brokers over the HTTP API of these worker URL(s), "
                        f"comma-separated (env {SERVER_ENV}, default {DEFAULT_SERVER})")
    p.add_argument("--namesrv-addr", "-n", default=None, metavar="HOST:PORT[;...]",
                   help="drive the brokers over the RocketMQ remoting protocol, as real brokers "
                        "(REGISTER_BROKER, QUERY_DATA_VERSION, UNREGISTER_BROKER), to these "
                        "NameServer addresses (admin's and mqadmin's -n)")
    p.add_argument("--duration", type=float, default=None, metavar="S",
                   help="seconds to run (default: until Ctrl-C)")
    p.add_argument("--slaves-every", type=int, default=3, metavar="K",
                   help="every K-th broker group gets a slave (0: none; default 3)")
    p.add_argument("--heartbeat", type=float, default=30.0, metavar="S",
                   help="seconds between a broker's heartbeats (default 30, not clamped)")
    p.add_argument("--spread", type=int, default=3, metavar="K",
                   help="a topic is on 1..K broker groups (default 3)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the layout (default 0)")
    p.add_argument("--keep", action="store_true",
                   help="leave the brokers registered at the end (they expire on their own)")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    add_connection_options(p, signs_as="the brokers' requests, as a broker with aclEnable")
    p.set_defaults(func=run)
    return p
