"""PNG plots of the figures in bench/results/*.json, written to bench/plots/.

* cost_vs_topics.png   registration wall and Redis script time by topic count (reregistration)
* cost_vs_brokers.png  sweep cost by live brokers, cascade cost by topics in the namespace
                       (sweep_cascade)
* contention.png       route read p50/p99 and throughput with and without writers (contention)
* memory.png           Redis bytes per key by key type (memory)

A plot whose results file is missing or lacks its figures is skipped, and said so.

    .venv/bin/python bench/plot.py
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

RESULTS = Path(__file__).parent / "results"
PLOTS = Path(__file__).parent / "plots"


def _dig(row: dict[str, Any], *path: str) -> float | None:
    value: Any = row
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return float(value) if isinstance(value, int | float) else None


def _series(ax: Any, xs: list[int], rows: list[dict[str, Any]], path: tuple[str, ...],
            label: str, style: str) -> None:
    points = [(x, y) for x, row in zip(xs, rows, strict=True)
              if (y := _dig(row, *path)) is not None]
    if points:
        ax.plot(*zip(*points, strict=True), style, label=label)


def cost_vs_topics(data: dict[str, Any]) -> Figure:
    sizes = sorted((k for k in data if k.isdigit()), key=int)
    if not sizes:
        raise KeyError("no topic counts")
    xs, rows = [int(s) for s in sizes], [data[s] for s in sizes]
    fig, (wall, redis) = plt.subplots(1, 2, figsize=(11, 4.2))
    _series(wall, xs, rows, ("first_registration_wall_ms",), "first registration", "o-")
    _series(wall, xs, rows, ("changed_data_version", "wall_ms_p50"), "changed DataVersion", "s-")
    _series(wall, xs, rows, ("unchanged", "wall_ms_p50"), "unchanged", "^-")
    wall.set_title("registration wall time (ms)")
    _series(redis, xs, rows, ("changed_data_version", "redis_script_ms_per_registration"),
            "changed: script time per registration (all chunks)", "s-")
    chunked = RESULTS / "script_time.json"  # the longest single call, from bench/script_time.py
    if chunked.exists():
        timed = json.loads(chunked.read_text())
        at = sorted((k for k in timed if k.isdigit()), key=int)
        redis.plot([int(k) for k in at],
                   [max(op["longest_script_ms"] for op in timed[k].values()) for k in at], "x--",
                   label="longest single script call, any operation (script_time)")
    _series(redis, xs, rows, ("unchanged", "redis_script_ms_per_registration"),
            "unchanged: script time per registration", "^-")
    redis.axhline(10, color="grey", linestyle=":", label="10 ms: longest script allowed")
    redis.axhline(1, color="silver", linestyle=":", label="1 ms: unchanged target")
    redis.set_title("Redis script time (ms)")
    for ax in (wall, redis):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("topics in the broker's table")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    return fig


def cost_vs_brokers(data: dict[str, Any]) -> Figure:
    sweep = data["sweep_none_due_by_live_brokers"]
    lives = sorted(sweep, key=int)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.plot([int(n) for n in lives], [sweep[n]["script_ms_per_sweep"] for n in lives], "o-",
              label="sweep, none due: script time per call")
    left.plot([int(n) for n in lives], [sweep[n]["wall_ms_p50"] for n in lives], "^-",
              label="sweep, none due: wall per call (p50)")
    due = data.get("sweep_due")
    if due:
        left.plot([due["live_brokers"]], [due["script_ms_per_call"]], "s",
                  label=f"{due['removed']} due, batches of {due['batch']}: script per call")
        left.plot([due["live_brokers"]], [due["longest_script_ms"]], "x",
                  label="same: longest script")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("live brokers")
    left.set_ylabel("ms")
    left.set_title("sweep cost vs live brokers")
    cascade = data.get("cascade_by_total_topics", {})
    totals = sorted(cascade, key=int)
    if totals:
        labels = [f"{int(t):,}" for t in totals]
        width = 0.27
        pos = range(len(totals))
        for k, (key, label) in enumerate((("script_ms_p50", "script time, all calls (p50)"),
                                          ("longest_script_ms_max", "longest single script"),
                                          ("wall_ms_p50", "wall (p50)"))):
            right.bar([p + (k - 1) * width for p in pos], [cascade[t][key] for t in totals],
                      width, label=label)
        right.axhline(10, color="grey", linestyle=":", label="10 ms: longest script allowed")
        right.set_xticks(list(pos), labels)
        topics = cascade[totals[0]]["broker_topics"]
        right.set_xlabel("topics in the namespace")
        right.set_ylabel("ms")
        right.set_title(f"unregistering a {topics:,}-topic broker")
    for ax in (left, right):
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    return fig


def _mode_label(row: dict[str, Any], mode: str) -> str:
    cache = "cache on" if mode.startswith("cache_on") else "cache off"
    rate = row.get("read_rate", "saturating")
    return f"{cache}\nreaders {rate}" if rate == "saturating" else f"{cache}\n{rate} reads/s"


def contention(data: dict[str, Any]) -> Figure:
    modes = [m for m in ("cache_off", "cache_on", "cache_off_paced", "cache_on_paced")
             if m in data]
    if not modes:
        raise KeyError("no cache_off / cache_on summary")
    phases = ("baseline", "unchanged", "changed")
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
    width = 0.13
    for m, mode in enumerate(modes):
        summary = data[mode]["summary"]
        for p, phase in enumerate(phases):
            row = summary.get(phase)
            if not row:
                continue
            x = m + (p - 1) * 2.2 * width
            axes[0].bar(x - width / 2, row["p50_ms"], width, color=f"C{p}",
                        label=f"{phase} p50" if m == 0 else None)
            axes[0].bar(x + width / 2, row["p99_ms"], width, color=f"C{p}", alpha=0.5,
                        hatch="//", label=f"{phase} p99" if m == 0 else None)
            axes[1].bar(x, row["reads_per_s"], 2 * width, color=f"C{p}",
                        label=phase if m == 0 else None)
    for ax, title in zip(axes, ("route read latency (ms)", "route reads per second"),
                         strict=True):
        ax.set_xticks(range(len(modes)), [_mode_label(data[m], m) for m in modes], fontsize=8)
        ax.set_title(title)
        ax.legend(fontsize=7)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_yscale("log")
    fig.suptitle("reads while every broker re-registers (writers) vs readers only (baseline)")
    return fig


def memory(data: dict[str, Any]) -> Figure:
    by_type = data["by_key_type"]
    kinds = sorted(by_type, key=lambda k: by_type[k]["bytes"], reverse=True)
    fig, ax = plt.subplots(figsize=(9, 4.2))
    ax.barh(kinds, [by_type[k]["bytes"] / (1 << 20) for k in kinds])
    ax.invert_yaxis()
    ax.set_xlabel("MiB in Redis (MEMORY USAGE)")
    layout = data.get("layout", {})
    ax.set_title(f"Redis memory by key type: {layout.get('brokers', '?')} brokers, "
                 f"{layout.get('topic_broker_rows', '?'):,} (topic, broker) rows")
    ax.grid(True, axis="x", alpha=0.3)
    return fig


PLOTS_BY_RESULTS: dict[str, tuple[str, Callable[[dict[str, Any]], Figure]]] = {
    "reregistration": ("cost_vs_topics", cost_vs_topics),
    "sweep_cascade": ("cost_vs_brokers", cost_vs_brokers),
    "contention": ("contention", contention),
    "memory": ("memory", memory),
}


def main() -> None:
    PLOTS.mkdir(exist_ok=True)
    for results, (name, draw) in PLOTS_BY_RESULTS.items():
        path = RESULTS / f"{results}.json"
        if not path.exists():
            print(f"skipped {name}.png: {path.name} is missing")
            continue
        try:
            fig = draw(json.loads(path.read_text()))
        except (KeyError, TypeError, ValueError) as exc:
            print(f"skipped {name}.png: {path.name} lacks its figures ({exc!r})")
            continue
        fig.tight_layout()
        fig.savefig(PLOTS / f"{name}.png", dpi=90)
        plt.close(fig)
        print(f"wrote {PLOTS / f'{name}.png'}")


if __name__ == "__main__":
    main()
