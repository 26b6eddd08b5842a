"""The report folder: Parquet tables, summary.json, summary.md and PNG charts.

Works on pandas frames collected from ``job.Analysis`` (aggregates: at most one row per broker,
group or topic), so it runs on the driver whatever ``--master`` is and needs no Spark itself.

Layout::

  <out>/summary.md                 human-readable summary, charts embedded
  <out>/summary.json               the same numbers, machine-readable
  <out>/tables/<name>.parquet      one file per result table (job.Analysis field names)
  <out>/charts/<name>.png          distributions (matplotlib, Agg)
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from nsfleet.analytics.job import NEAR_DEADLINE
from nsfleet.analytics.scan import redact

LIST_LIMIT = 20  # rows of a detail table shown in summary.md (the Parquet file has them all)


@dataclass(slots=True)
class ReportData:
    namespace: str
    redis_url: str
    now_ms: int
    totals: dict[str, int]
    results: dict[str, pd.DataFrame]  # job.Analysis field name -> collected table
    files: dict[str, dict[str, str]] = field(default_factory=dict)  # kind -> name -> path


def _quantiles(values: pd.Series) -> dict[str, float | None]:
    v = values.dropna().to_numpy(dtype=float)
    if v.size == 0:
        return {"min": None, "p50": None, "p90": None, "p99": None, "max": None}
    p50, p90, p99 = np.percentile(v, [50, 90, 99])
    return {"min": float(v.min()), "p50": float(p50), "p90": float(p90), "p99": float(p99),
            "max": float(v.max())}


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(df.to_json(orient="records"))


def summarize(data: ReportData) -> dict[str, Any]:
    """Every number of summary.md, as a JSON-able dict."""
    r = data.results
    skew = r["queue_skew"]
    hb = r["heartbeats"]
    inc = r["inconsistencies"]
    kinds = inc["kind"].value_counts() if len(inc) else pd.Series(dtype="int64")
    multi = skew[skew["groups"] > 1]
    top = skew.dropna(subset=["skew"]).head(1)
    counts = {
        **data.totals,
        "groupsWithoutMaster": len(r["groups_without_master"]),
        "readOnlyTopics": len(r["read_only_topics"]),
        "queuesWithoutGroup": int(kinds.get("queue_without_group", 0)),
        "groupsWithoutLiveMember": int(kinds.get("group_without_live_member", 0)),
        "brokersWithoutGroup": int(kinds.get("broker_without_group", 0)),
        "multiGroupTopics": len(multi),
        "skewedTopics": int((multi["skew"] >= 2).sum()),
        "controllerBrokerSets": len(r["controller_broker_sets"]),
        "controllerSetsWithoutMaster": int(
            (r["controller_broker_sets"]["masterBrokerId"] == "").sum()),
    }
    timeouts = hb["heartbeatTimeoutMillis"] if len(hb) else pd.Series(dtype="int64")
    return {
        "namespace": data.namespace,
        "redisUrl": redact(data.redis_url),
        "snapshotMs": data.now_ms,
        "snapshot": datetime.fromtimestamp(data.now_ms / 1000, UTC).isoformat(),
        "counts": counts,
        "brokersByClusterZone": _records(r["brokers_by_cluster_zone"]),
        "maxSkew": (None if top.empty else
                    {"topic": str(top["topic"].iloc[0]), "skew": float(top["skew"].iloc[0]),
                     "groups": int(top["groups"].iloc[0])}),
        "heartbeat": {
            "ageMs": _quantiles(hb["ageMs"]),
            "remainingMs": _quantiles(hb["remainingMs"]),
            "timeoutMs": _quantiles(timeouts),
            "nearDeadline": {f"{int(t * 100)}%": int((hb["headroom"] < t).sum())
                             for t in NEAR_DEADLINE},
        },
        "files": data.files,
    }


# --- charts ------------------------------------------------------------------------------------


def _chart(path: Path, title: str, draw: Callable[[Axes], None], empty: bool) -> None:
    # The object API with an explicit Agg canvas: no pyplot global state, no GUI backend picked
    # up from the environment, safe in a process that also runs other code.
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(title)
    if empty:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    else:
        draw(ax)
    fig.savefig(path, dpi=100)


def _hist(values: pd.Series, xlabel: str, bins: int | np.ndarray = 30,
          marks: Mapping[str, float] | None = None) -> Callable[[Axes], None]:
    def draw(ax: Axes) -> None:
        ax.hist(values.dropna().to_numpy(dtype=float), bins=bins, color="#4C72B0",
                edgecolor="white")
        for label, x in (marks or {}).items():
            ax.axvline(x, color="#C44E52", linestyle="--", linewidth=1)
            ax.text(x, ax.get_ylim()[1] * 0.95, f" {label}", color="#C44E52", va="top")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("count")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # no 0.5 of a group
    return draw


def _stacked_bars(df: pd.DataFrame) -> Callable[[Axes], None]:
    def draw(ax: Axes) -> None:
        pivot = df.pivot_table(index="cluster", columns="zone", values="brokers",
                               aggfunc="sum", fill_value=0)
        bottom = np.zeros(len(pivot))
        for zone in pivot.columns:
            ax.bar(pivot.index.astype(str), pivot[zone].to_numpy(), bottom=bottom, label=str(zone))
            bottom += pivot[zone].to_numpy()
        ax.set_ylabel("live brokers")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(title="zone", fontsize="small")
    return draw


def write_charts(out: Path, r: Mapping[str, pd.DataFrame]) -> dict[str, str]:
    charts = out / "charts"
    charts.mkdir(parents=True, exist_ok=True)
    hb, skew, gt = r["heartbeats"], r["queue_skew"], r["group_topics"]
    multi = skew[skew["groups"] > 1]
    specs: list[tuple[str, str, Callable[[Axes], None], bool]] = [
        ("brokers_by_cluster_zone", "Live brokers per cluster and zone",
         _stacked_bars(r["brokers_by_cluster_zone"]), r["brokers_by_cluster_zone"].empty),
        ("topics_per_group", "Topics per broker group",
         _hist(gt["topics"], "topics in the group"), gt.empty),
        ("queue_skew", "Write-queue skew of topics on 2+ groups (largest / mean)",
         _hist(multi["skew"], "skew", marks={"2x": 2.0}), multi["skew"].dropna().empty),
        ("heartbeat_age", "Age of the last heartbeat",
         _hist(hb["ageMs"] / 1000, "seconds since the last heartbeat"), hb.empty),
        ("deadline_headroom", "Time left before the deadline, share of the heartbeat timeout",
         # Fixed 5% bins over 0-100: a fresh fleet sits in one sliver near 100% that automatic
         # bins would stretch across the whole axis (or, with the marks, make invisible).
         _hist((hb["headroom"] * 100).clip(0, 100), "% of the timeout left",
               bins=np.linspace(0, 100, 21),
               marks={f"{int(t * 100)}%": t * 100 for t in NEAR_DEADLINE}), hb.empty),
    ]
    files = {}
    for name, title, draw, empty in specs:
        path = charts / f"{name}.png"
        _chart(path, title, draw, empty)
        files[name] = str(path.relative_to(out))
    return files


# --- tables and markdown -----------------------------------------------------------------------


def write_tables(out: Path, r: Mapping[str, pd.DataFrame]) -> dict[str, str]:
    tables = out / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, df in r.items():
        path = tables / f"{name}.parquet"
        df.to_parquet(path, engine="pyarrow", index=False)
        files[name] = str(path.relative_to(out))
    return files


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.2f}"
    if isinstance(v, list | tuple | np.ndarray):
        return ", ".join(str(x) for x in v)
    return str(v).replace("|", "\\|")


def md_table(df: pd.DataFrame, limit: int | None = LIST_LIMIT) -> str:
    """A Markdown table (pandas' to_markdown needs tabulate, which nsfleet does not depend on)."""
    if df.empty:
        return "_none_\n"
    shown = df if limit is None else df.head(limit)
    lines = ["| " + " | ".join(map(str, df.columns)) + " |",
             "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |"
              for row in shown.itertuples(index=False)]
    if limit is not None and len(df) > limit:
        lines.append(f"\n_{len(df) - limit} more rows in the Parquet table._")
    return "\n".join(lines) + "\n"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v / 1000:.1f} s"


def render_markdown(s: Mapping[str, Any], r: Mapping[str, pd.DataFrame]) -> str:
    c = s["counts"]
    hb = s["heartbeat"]
    files = s["files"]
    counts = pd.DataFrame([
        ("clusters", c["clusters"]), ("broker groups", c["groups"]),
        ("live brokers", c["brokers"]), ("masters", c["masters"]), ("slaves", c["slaves"]),
        ("zones", c["zones"]), ("topics", c["topics"]), ("queue data rows", c["queueRows"]),
        ("read queues", c["readQueues"]), ("write queues", c["writeQueues"]),
        ("KV entries", c["kvEntries"]), ("KV namespaces", c["kvNamespaces"]),
        ("groups without a master", c["groupsWithoutMaster"]),
        ("read-only topics", c["readOnlyTopics"]),
        ("topics on 2+ groups", c["multiGroupTopics"]),
        ("topics with skew >= 2", c["skewedTopics"]),
        ("queue data without a group", c["queuesWithoutGroup"]),
        ("groups with no live member", c["groupsWithoutLiveMember"]),
        ("live brokers without a group", c["brokersWithoutGroup"]),
        ("controller broker sets", c["controllerBrokerSets"]),
        ("controller sets without a master", c["controllerSetsWithoutMaster"]),
    ], columns=["metric", "value"])
    ages = pd.DataFrame([
        ("heartbeat age", *(_ms(hb["ageMs"][q]) for q in ("min", "p50", "p90", "p99", "max"))),
        ("time to deadline",
         *(_ms(hb["remainingMs"][q]) for q in ("min", "p50", "p90", "p99", "max"))),
        ("heartbeat timeout",
         *(_ms(hb["timeoutMs"][q]) for q in ("min", "p50", "p90", "p99", "max"))),
    ], columns=["", "min", "p50", "p90", "p99", "max"])
    near = ", ".join(f"{n} below {k}" for k, n in hb["nearDeadline"].items())
    top = s["maxSkew"]
    skew_line = ("no topic has write queues" if top is None else
                 f"most skewed: `{top['topic']}` ({top['skew']:.2f}x over {top['groups']} groups)")
    multi = r["queue_skew"][r["queue_skew"]["groups"] > 1]

    def chart(name: str) -> str:
        return f"![{name}]({files['charts'][name]})\n"

    parts = [
        f"# nsfleet fleet report: namespace `{s['namespace']}`\n",
        f"Snapshot at {s['snapshot']} (Redis time), read from `{s['redisUrl']}`. Tables were read "
        "once and cached, so every number below describes the same snapshot.\n",
        "## Totals\n", md_table(counts, None),
        "## Brokers per cluster and zone\n", md_table(r["brokers_by_cluster_zone"], None),
        chart("brokers_by_cluster_zone"),
        "## Topics and queues per broker group\n",
        md_table(r["group_topics"].sort_values("topics", ascending=False, kind="stable")),
        chart("topics_per_group"),
        "## Queue skew\n",
        "Write queues of a topic across the groups serving it: largest / mean (1.00 = even). "
        f"{skew_line}.\n", md_table(multi), chart("queue_skew"),
        "## Groups without a master\n",
        "No live broker with brokerId 0; with enableActingMaster the lowest-id slave serves "
        "reads and the group's queue data loses write permission.\n",
        md_table(r["groups_without_master"]),
        "## Read-only topics\n", "Topics none of whose queue data has the write permission.\n",
        md_table(r["read_only_topics"]),
        "## Heartbeats and deadlines\n", md_table(ages, None),
        f"Brokers close to their deadline (share of the timeout left): {near}.\n",
        chart("heartbeat_age"), chart("deadline_headroom"),
        md_table(r["heartbeats"].head(LIST_LIMIT), None),
        "## Inconsistencies\n",
        "`queue_without_group`: queue data naming a group with no group row; "
        "`group_without_live_member`: a group none of whose brokers has a live row (expected "
        "until the next sweep); `broker_without_group`: a live broker whose group row is "
        "missing.\n", md_table(r["inconsistencies"]),
        "## Controller broker sets\n",
        "RocketMQ 5 controller mode (docs/controller.md): each set's master and epochs, its "
        "in-sync replicas, and whether the route lists the master as brokerId 0.\n",
        md_table(r["controller_broker_sets"]),
        "## Files\n",
        "\n".join(f"- `{p}`" for p in [*files["tables"].values(), "summary.json"]) + "\n",
    ]
    return "\n".join(parts)


def write_report(out: Path, data: ReportData) -> dict[str, Any]:
    """Write every file of the report; returns the summary written to summary.json."""
    out.mkdir(parents=True, exist_ok=True)
    data.files = {"tables": write_tables(out, data.results),
                  "charts": write_charts(out, data.results)}
    summary = summarize(data)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(render_markdown(summary, data.results))
    return summary
