"""The one thread per worker process that decodes and encodes big topic tables.

A registration storm brings a worker dozens of 10,000-topic tables at once. Off the event loop,
each in its own thread of the default executor, they shared the GIL: all finished together,
~0.2 s after the first arrived, so Redis sat idle until then, and the loop, competing with
every such thread for the GIL, held route reads up to ~250 ms (bench/scale.py). In one thread
they are done in arrival order, the first within milliseconds, and the loop competes with one
thread only.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

# A request body bigger than this (a registration of about 600 topics) is decoded here: decoding
# holds the event loop for milliseconds per thousand topics, and reads wait behind it.
OFF_LOOP_BODY_BYTES = 64 * 1024

# How long the table thread may run before the event loop, waiting, gets the GIL (CPython's
# default: 5 ms). Each turn of the loop that waited for sockets wants the GIL back, and a read
# takes three or four turns: during a storm, with a table in this thread, a read could wait
# ~5 ms at each (bench/scale.py's 300 x 10k with a prober beside it: reads' p99, median of
# alternating runs, 50.6 ms at 5 ms, 42.8 ms at 1 ms or 0.5 ms, the storm as long).
GIL_SWITCH_S = 0.001

P = ParamSpec("P")
R = TypeVar("R")

_executor: tuple[int, ThreadPoolExecutor] | None = None


def _thread() -> ThreadPoolExecutor:
    global _executor
    # Per process: a worker forked from a process that used it has no thread behind it.
    if _executor is None or _executor[0] != os.getpid():
        _executor = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="nsfleet-tables"))
    return _executor[1]


async def in_table_thread(func: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``func(*args, **kwargs)`` in the table thread, with the caller's context (as
    ``asyncio.to_thread``)."""
    call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_thread(), call)


def favour_the_event_loop() -> None:
    """A worker process's GIL changes hands every ``GIL_SWITCH_S`` (the process entry of
    ``nsfleet serve`` calls this: it is the process's setting, not one worker's)."""
    sys.setswitchinterval(GIL_SWITCH_S)
