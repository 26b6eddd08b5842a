"""The simulated brokers of ``nsfleet simulate``: every broker of a ``Plan`` registers, heartbeats
until the run ends and unregisters (unless kept), over the HTTP API (``BrokerAgent``) or the
RocketMQ remoting protocol (``RemotingBrokerAgent``), with a rich progress display."""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
import time
from dataclasses import dataclass

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
from nsfleet.client.remoting_broker import RemotingBrokerAgent
from nsfleet.simulate.plan import Plan

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


def _registering(summary: Summary, done: bool) -> str:
    """The registration bar's label: the bar counts brokers registered, so the failures are
    named here (a full-looking bar of attempts would read as success)."""
    label = "registered" if done else "registering"
    return f"{label} ({summary.failed} failed)" if summary.failed else label


async def _start_all(agents: list[Agent], progress: Progress, task: TaskID,
                     summary: Summary) -> list[Agent]:
    gate = asyncio.Semaphore(START_CONCURRENCY)

    async def start(agent: Agent) -> bool:
        async with gate:
            try:
                await agent.start()
            except Exception as exc:
                summary.failed += 1
                summary.first_error = summary.first_error or str(exc)
                progress.update(task, description=_registering(summary, done=False))
                return False
            progress.advance(task)
            return True

    started = await asyncio.gather(*(start(a) for a in agents))
    progress.update(task, description=_registering(summary, done=True))
    return [a for a, ok in zip(agents, started, strict=True) if ok]


async def _close_all(agents: list[Agent], keep: bool, progress: Progress) -> int:
    """Stop every broker, unregistering it unless ``keep``; how many a NameServer confirmed."""
    task = progress.add_task("unregistering" if not keep else "stopping (--keep)",
                             total=len(agents))
    unconfirmed = 0

    async def close(agent: Agent) -> bool:
        nonlocal unconfirmed
        done = await agent.close(unregister=not keep)  # --keep is refused with -n
        # As while registering, the bar counts what a NameServer confirmed.
        if done or keep:
            progress.advance(task)
        else:
            unconfirmed += 1
            progress.update(task, description=f"unregistering ({unconfirmed} not confirmed)")
        return done

    return sum(await asyncio.gather(*(close(a) for a in agents)))


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
            if started:  # no bar for nothing to unregister: a full one would read as success
                summary.unregistered = await _close_all(started, keep, progress)
    summary.registrations = sum(a.stats.registrations for a in agents)
    summary.heartbeats = sum(a.stats.heartbeats for a in agents)
    summary.errors = summary.failed + sum(a.stats.errors for a in agents)
    summary.failovers = sum(a.failovers for a in agents)
    summary.seconds = round(time.monotonic() - began, 3)
    return summary
