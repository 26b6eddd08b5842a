"""One worker process of ``nsfleet serve --processes N`` (nsfleet.supervisor starts them): its
place in the group, and ``/metrics`` for the whole host.

Every process serves the HTTP API, /readyz included, for itself; a scrape of ``/metrics`` lands
on one of them (the kernel picks), so that process asks each of the others for its own
registry's exposition, over a Unix socket in the group's private directory
(``metrics-K.sock``), and answers all of them, each series labelled ``process="K"`` (K = 0..N-1,
the process's slot: a restarted process keeps its slot, so its counters read as a reset of the
same series). ``nsfleet_process_up{process}`` says which processes answered (0: restarting).
Sum over the label (``sum without (process) (...)``) for host totals.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

log = structlog.get_logger(__name__)

INDEX_ENV = "NSFLEET_PROCESS_INDEX"
COUNT_ENV = "NSFLEET_PROCESS_COUNT"
DIR_ENV = "NSFLEET_PROCESS_DIR"
SCRAPE_TIMEOUT = 3.0  # seconds a sibling gets to answer a scrape
LABEL = "process"


@dataclass
class ProcessGroup:
    index: int
    count: int
    directory: Path
    _runner: web.AppRunner | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> ProcessGroup | None:
        """This process's place, when the supervisor started it (None: a lone worker)."""
        env = os.environ if environ is None else environ
        if INDEX_ENV not in env:
            return None
        return cls(int(env[INDEX_ENV]), int(env[COUNT_ENV]), Path(env[DIR_ENV]))

    def socket_path(self, index: int) -> Path:
        return self.directory / f"metrics-{index}.sock"

    async def start(self, registry: CollectorRegistry) -> None:
        """Serve this process's own registry on its Unix socket."""

        async def own(_request: web.Request) -> web.Response:
            return web.Response(body=generate_latest(registry))

        app = web.Application()
        app.router.add_get("/metrics", own)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        path = self.socket_path(self.index)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # left by this slot's previous process
        await web.UnixSite(self._runner, str(path)).start()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        with contextlib.suppress(OSError):
            self.socket_path(self.index).unlink()

    async def _fetch(self, session: aiohttp.ClientSession, index: int) -> bytes | None:
        path = self.socket_path(index)
        if not path.exists():
            return None
        try:
            connector = aiohttp.UnixConnector(path=str(path))
            async with (aiohttp.ClientSession(connector=connector) as unix,
                        asyncio.timeout(SCRAPE_TIMEOUT),
                        unix.get("http://process/metrics") as resp):
                return await resp.read() if resp.status == 200 else None
        except (OSError, aiohttp.ClientError, TimeoutError):
            return None

    async def exposition(self, registry: CollectorRegistry) -> bytes:
        """Every process's metrics, labelled with its slot, as one exposition."""
        own = generate_latest(registry)
        async with aiohttp.ClientSession() as session:
            others = await asyncio.gather(*(self._fetch(session, k) for k in range(self.count)
                                            if k != self.index))
        texts: dict[int, bytes | None] = dict(zip((k for k in range(self.count)
                                                   if k != self.index), others, strict=True))
        texts[self.index] = own
        return await asyncio.to_thread(merge, texts)


def _labelled(line: str, value: str) -> str:
    """A sample line with ``process="value"`` added as its first label."""
    brace, space = line.find("{"), line.find(" ")
    if brace != -1 and (space == -1 or brace < space):
        rest = line[brace + 1:]
        return f'{line[:brace]}{{{LABEL}="{value}"{"," if not rest.startswith("}") else ""}{rest}'
    return f'{line[:space]}{{{LABEL}="{value}"}}{line[space:]}'


def merge(texts: Mapping[int, bytes | None]) -> bytes:
    """Prometheus text expositions of the processes (None: no answer) as one: each family once
    (its HELP and TYPE), then its samples from every process, labelled with the process."""
    # family name -> {"HELP": line, "TYPE": line, "": [samples]}, in the order first seen
    families: dict[str, dict[str, list[str]]] = {}
    for index in sorted(texts):
        text = texts[index]
        if text is None:
            continue
        current: dict[str, list[str]] | None = None
        for line in text.decode("utf-8").splitlines():
            if line.startswith("#"):
                parts = line.split(" ", 3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                    current = families.setdefault(parts[2], {"HELP": [], "TYPE": [], "": []})
                    if not current[parts[1]]:
                        current[parts[1]].append(line)
                continue
            if not line:
                continue
            if current is None:  # a sample before any header: a family of its own
                name = line.split("{", 1)[0].split(" ", 1)[0]
                current = families.setdefault(name, {"HELP": [], "TYPE": [], "": []})
            current[""].append(_labelled(line, str(index)))
    out = ["# HELP nsfleet_process_up 1 when the process of this slot answered this scrape",
           "# TYPE nsfleet_process_up gauge",
           *(f'nsfleet_process_up{{{LABEL}="{k}"}} {0.0 if texts[k] is None else 1.0}'
             for k in sorted(texts))]
    for family in families.values():
        out.extend(family["HELP"] + family["TYPE"] + family[""])
    return ("\n".join(out) + "\n").encode("utf-8")
