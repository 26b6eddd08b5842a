"""The table of every issue-14 and issue-32 figure against its target, from bench/results/*.json,
as Markdown in bench/results/summary.md (docs/performance.md shows the latest one). A figure whose
results file or key is missing is listed as "not measured".

    .venv/bin/python bench/summary.py
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


@dataclass(frozen=True)
class Figure:
    what: str
    results: str  # bench/results/<results>.json
    path: tuple[str, ...]  # keys down to the number
    target: float | None  # None: reported, no target
    at_most: bool = True  # the target is an upper bound (else a lower bound)
    unit: str = ""


def _cascade_longest(data: dict[str, Any]) -> float:
    return max(row["longest_script_ms_max"] for row in data["cascade_by_total_topics"].values())


def _console_filter_max(data: dict[str, Any]) -> float:
    return max(query["max"] for query in data["filter_ms"].values())


def _script_time_longest(data: dict[str, Any]) -> float:
    """The longest single script call of any operation at the largest size measured."""
    size = max((k for k in data if k.isdigit()), key=int)
    return max(op["longest_script_ms"] for op in data[size].values())


def _storm_over_floor(data: dict[str, Any]) -> float:
    variants = data["variants"]
    return variants["nsfleet"]["us_per_row"] / \
        variants["rows6+topic-sadd+broker-and-topic-lists+change-message"]["us_per_row"]


def _route_60(data: dict[str, Any]) -> dict[str, Any]:
    """route_cost.json's shape of 60 groups of one member."""
    return next(s for s in data["shapes"] if (s["groups"], s["members_per_group"]) == (60, 1))


def _route_over_floor(data: dict[str, Any]) -> float:
    return float(_route_60(data)["route_over_floor"])


def _route_us_60(data: dict[str, Any]) -> float:
    return float(_route_60(data)["route_us_per_read"])


CONTENTION_MODES = {"cache_off": "cache off, readers saturating",
                    "cache_on": "cache on, readers saturating",
                    "cache_off_paced": "cache off, readers paced",
                    "cache_on_paced": "cache on, readers paced"}


FIGURES: tuple[Figure, ...] = (
    Figure("unchanged re-registration, Redis script time at 60k topics", "reregistration",
           ("60000", "unchanged", "redis_script_ms_per_registration"), 1.0, unit="ms"),
    Figure("first registration of 60k topics, wall", "reregistration",
           ("60000", "first_registration_wall_ms"), 1000.0, unit="ms"),
    Figure("first registration of 60k topics, wall (chunked; bench/script_time.py)",
           "script_time", ("60000", "first_registration", "wall_ms"), 1000.0, unit="ms"),
    Figure("longest single script call at 60k topics: first, changed and unchanged "
           "registration, delete_absent, unregister and expiry cascades, topic deletion",
           "script_time", ("@script_time_longest",), 10.0, unit="ms"),
    Figure("worst stall another Redis client saw during a changed 60k-topic registration",
           "script_time", ("60000", "changed_registration", "ping_ms_max"), None, unit="ms"),
    Figure("60k-topic compressed REGISTER_BROKER over remoting, unchanged, round trip",
           "remoting_register", ("over_remoting", "5x_compressed", "unchanged_ms_p50"), 300.0,
           unit="ms"),
    Figure("60k-topic compressed REGISTER_BROKER over remoting, unchanged, table bytes this "
           "worker has not seen (full decode, as after a restart), round trip",
           "remoting_register",
           ("over_remoting", "5x_compressed", "unchanged_full_decode_ms_p50"), 300.0, unit="ms"),
    Figure("60k-topic compressed REGISTER_BROKER over remoting, new DataVersion, same table, "
           "round trip", "remoting_register",
           ("over_remoting", "5x_compressed", "changed_ms_p50"), None, unit="ms"),
    Figure("cached HTTP route reads / bare aiohttp handler (wrk, same run)", "hotpath",
           ("http", "ratio"), 0.8, at_most=False, unit="x"),
    Figure("cached remoting route reads / minimal framed-TCP server (same run)", "hotpath",
           ("remoting", "ratio"), 0.8, at_most=False, unit="x"),
    Figure("sweep, 10k live brokers, none due: Redis script time per sweep", "sweep_cascade",
           ("sweep_none_due_by_live_brokers", "10000", "script_ms_per_sweep"), None, unit="ms"),
    Figure("sweep, 1,000 due among 10k: longest single script", "sweep_cascade",
           ("sweep_due", "longest_script_ms"), 10.0, unit="ms"),
    Figure("sweep, 1,000 due among 10k: Redis script time per expired broker", "sweep_cascade",
           ("sweep_due", "script_ms_per_broker"), None, unit="ms"),
    Figure("unregistering a 10k-topic broker: among 100k topics / among 10k (script time)",
           "sweep_cascade", ("cascade_ratio_script",), 3.0, unit="x"),
    Figure("unregistering a 10k-topic broker: longest single script", "sweep_cascade",
           ("@cascade_longest",), 10.0, unit="ms"),
    Figure("unchanged 10k-topic registration over HTTP, idle worker: worker CPU per call",
           "contention", ("unchanged_registration_over_http", "worker_cpu_ms_per_registration"),
           None, unit="ms"),
    Figure("10k-topic registration over HTTP, new DataVersion, same table, idle worker: worker "
           "CPU per call", "contention",
           ("changed_registration_over_http", "worker_cpu_ms_per_registration"), None, unit="ms"),
    Figure("Redis bytes per broker (1k brokers x 200 topics)", "memory",
           ("bytes_per_broker",), None, unit="B"),
    Figure("Redis bytes per (topic, broker) row", "memory",
           ("bytes_per_topic_broker_row",), None, unit="B"),
    Figure("Redis used_memory per (topic, broker) row, all keys", "memory",
           ("used_memory_per_topic_broker_row_all_in",), None, unit="B"),
    Figure("worker RSS with every route (10k, 20 groups each) cached", "memory",
           ("worker", "worker_rss_mib_every_route_cached"), None, unit="MiB"),
    Figure("console, 10,000 topics and 500 brokers: first render from a worker that has not "
           "read the topics yet, slowest", "console", ("first_render_ms", "new_worker", "max"),
           1000.0, unit="ms"),
    Figure("console: first render after a change of 80 topics, slowest", "console",
           ("first_render_ms", "after_change", "max"), 1000.0, unit="ms"),
    Figure("console: filtering the 10,000 topics, slowest query", "console",
           ("@console_filter_max",), 100.0, unit="ms"),
    # Issue 32: 60 brokers x 10,000 topics through two workers (bench/scale.py).
    # The storm figures: medians of the run's storms (alternating with Java's), the max of
    # their maxima, the sum of their failures.
    Figure("60 x 10k: every broker registering at once (storm), wall, median of the run's",
           "scale", ("storm_medians", "nsfleet_storm_s"), 3.5, unit="s"),
    Figure("60 x 10k: the storm / the Java NameServer's, medians in the same run", "scale",
           ("storm_medians", "nsfleet_over_java"), None, unit="x"),
    Figure("60 x 10k: the same storm with no route reads meanwhile, wall", "scale",
           ("nsfleet", "storm_without_reads", "storm_s"), None, unit="s"),
    Figure("60 x 10k: route reads during the storm, p99 (median of the storms')", "scale",
           ("storm_medians", "nsfleet_reads_p99_ms"), 50.0, unit="ms"),
    Figure("60 x 10k: route reads during the storm, max (of every storm)", "scale",
           ("storm_medians", "nsfleet_reads_max_ms"), 250.0, unit="ms"),
    Figure("60 x 10k: route reads during the storm, failed (in every storm)", "scale",
           ("storm_medians", "nsfleet_reads_failed"), 0.0),
    # The same with a table of each broker's own (bench/scale.py --distinct-tables): every
    # table decoded and encoded, none found in a worker's memo.
    Figure("60 x 10k, a table per broker: the storm / the Java NameServer's, medians",
           "scale-distinct-7", ("storm_medians", "nsfleet_over_java"), None, unit="x"),
    Figure("60 x 10k, a table per broker: route reads during the storm, p99 (median)",
           "scale-distinct-7", ("storm_medians", "nsfleet_reads_p99_ms"), 50.0, unit="ms"),
    Figure("300 x 10k, a table per broker: the storm / the Java NameServer's, medians",
           "scale-300x10k-distinct-11", ("storm_medians", "nsfleet_over_java"), None,
           unit="x"),
    Figure("300 x 10k, a table per broker: route reads during the storm, p99 (median)",
           "scale-300x10k-distinct-11", ("storm_medians", "nsfleet_reads_p99_ms"), 50.0,
           unit="ms"),
    # The floor under that storm (bench/table_cost.py): each side's CPU for the same 300 tables
    # sent one after another, and nsfleet's over two cores against Java's sequential wall time.
    Figure("300 x 10k, a table per broker, one after another: CPU, nsfleet / Java",
           "table_cost", ("cpu_nsfleet_over_java",), None, unit="x"),
    Figure("300 x 10k, a table per broker: nsfleet's CPU over two cores / Java's sequential wall",
           "table_cost", ("nsfleet_bound_over_java_sequential_wall",), None, unit="x"),
    # What writing a topic's rows of eight groups with one HSET saves Redis (bench/joint_rows.py).
    Figure("a first registration's row, Redis CPU: eight groups' chunks a call / one a call",
           "joint_rows", ("redis_cpu_over_one_group_a_call", "8"), None, unit="x"),
    # The Helm chart's limit of a worker's memory: 512 MiB.
    Figure("300 x 10k, a table per broker: a worker's peak RSS over the storm and rounds",
           "scale-300x10k-distinct-11", ("@worker_peak_rss",), 512.0, unit="MiB"),
    Figure("60 x 10k: unchanged split round / unchanged whole round, Redis time", "scale",
           ("nsfleet", "rounds", "split_over_whole"), 2.0, unit="x"),
    Figure("60 x 10k: the same, Redis's own CPU less idle", "scale",
           ("nsfleet", "rounds", "split_over_whole_redis_cpu"), 2.0, unit="x"),
    Figure("60 x 10k: Redis bytes per queue row", "scale",
           ("nsfleet", "memory", "bytes_per_row"), 300.0, unit="B"),
    Figure("60 x 10k: 40 brokers' connections closing at once, an UNREGISTER_BROKER meanwhile "
           "answers in", "scale", ("nsfleet", "departures", "unregister_answer_s"), 3.0,
           unit="s"),
    Figure("60 x 10k: route reads while those 40 brokers' rows go, p99", "scale",
           ("nsfleet", "departures", "reads_during_ms", "p99"), 50.0, unit="ms"),
    Figure("per queue row of a first registration, Redis time: nsfleet / the floor of its "
           "layout (every write it needs, alone)", "storm_floor", ("@storm_over_floor",), None,
           unit="x"),
    Figure("a route read of 60 groups (one member each), Redis time", "route_cost",
           ("@route_us_60",), None, unit="us"),
    Figure("the same / the floor of the row layout (the groups, their names and their queue "
           "rows, alone)", "route_cost", ("@route_over_floor",), None, unit="x"),
)

def _worker_peak_rss(data: dict[str, Any]) -> float:
    memory = data["nsfleet"]["memory"]
    return max(max(memory[phase]["peak_rss_mib"])
               for phase in ("workers_after_storm", "workers_after_rounds"))


COMPUTED = {"@worker_peak_rss": _worker_peak_rss, "@cascade_longest": _cascade_longest,
            "@script_time_longest": _script_time_longest,
            "@console_filter_max": _console_filter_max, "@storm_over_floor": _storm_over_floor,
            "@route_us_60": _route_us_60, "@route_over_floor": _route_over_floor}


def value(figure: Figure) -> float | None:
    path = RESULTS / f"{figure.results}.json"
    if not path.exists():
        return None
    node: Any = json.loads(path.read_text())
    try:
        if figure.path[0] in COMPUTED:
            return float(COMPUTED[figure.path[0]](node))
        for key in figure.path:
            node = node[key]
        return float(node)
    except (KeyError, TypeError, ValueError):
        return None


def verdict(figure: Figure, number: float | None) -> str:
    if number is None:
        return "not measured"
    if figure.target is None:
        return "reported"
    met = number <= figure.target if figure.at_most else number >= figure.target
    return "met" if met else "**not met**"


def _number(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def contention_rows() -> list[str]:
    """One row per reader mode and writer phase: the worst of the p50, p99 and (saturating
    readers) throughput degradations, each shown."""
    path = RESULTS / "contention.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    rows = []
    for mode, label in CONTENTION_MODES.items():
        for phase in ("unchanged", "changed"):
            what = f"contention, {label}, {phase} writers: degradation vs no writers"
            found = data.get(mode, {}).get("summary", {}).get(f"degradation_{phase}")
            if not found:
                rows.append(f"| {what} (`contention.json`) | — | ≤ 2 x | not measured |")
                continue
            metrics = ("p50", "p99") if mode.endswith("_paced") else ("p50", "p99", "throughput")
            worst = max(found[m] for m in metrics)
            shown = ", ".join(f"{m} {found[m]:.3g}" for m in metrics)
            rows.append(f"| {what} (`contention.json`) | {shown} x | ≤ 2 x | "
                        f"{'met' if worst <= 2 else '**not met**'} |")
    return rows


def table() -> str:
    lines = ["| figure | measured | target | |", "|---|---|---|---|"]
    for figure in FIGURES:
        number = value(figure)
        shown = "—" if number is None else f"{_number(number)} {figure.unit}".strip()
        bound = "" if figure.target is None else \
            f"{'≤' if figure.at_most else '≥'} {figure.target:g} {figure.unit}".strip()
        lines.append(f"| {figure.what} (`{figure.results}.json`) | {shown} | {bound} | "
                     f"{verdict(figure, number)} |")
        if figure.path == ("@cascade_longest",):
            lines += contention_rows()
    return "\n".join(lines) + "\n"


def main() -> None:
    text = table()
    (RESULTS / "summary.md").write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
