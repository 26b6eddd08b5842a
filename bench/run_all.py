"""Run every benchmark in bench/ one after the other, then regenerate the plots and the table of
figures against their targets (bench/results/summary.md).

Each script starts its own redis-server and workers and writes bench/results/<name>.json. The
whole run is bounded by --budget seconds: each script gets what is left (at most its own cap)
and is killed past it; a script that fails or is killed is reported and the others still run.
With --quick, every script that has a --quick option gets it. Scripts another change has not
added yet are skipped. Writes bench/results/run_all.json (what ran, how long, how it ended).

Keep the machine otherwise idle: the figures are ratios to ceilings measured in the same run,
but a loaded machine still moves them.

    .venv/bin/python bench/run_all.py [--quick] [--budget 3600] [--only contention,memory]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchlib import new_results, write_results

BENCH = Path(__file__).parent
# (script, cap in seconds for a full run); quick runs get a fifth of the cap.
SCRIPTS: tuple[tuple[str, int], ...] = (
    ("reregistration", 900),
    ("script_time", 900),
    ("remoting_register", 600),
    ("hotpath", 900),
    ("route_bench", 300),
    ("route_cost", 300),
    ("route_assembly", 300),
    ("propagation", 300),
    ("contention", 1800),
    ("sweep_cascade", 600),
    ("memory", 300),
    ("capacity", 300),
    ("console_bench", 300),
    ("bad_input", 300),
)


def run(script: Path, quick: bool, timeout: float) -> tuple[str, float]:
    """(how it ended, seconds); the script runs in its own process group, killed whole."""
    command = [sys.executable, str(script)]
    if quick and '"--quick"' in script.read_text():
        command.append("--quick")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(BENCH.parent), os.environ.get("PYTHONPATH", "")) if p)}
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=BENCH.parent, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL)
    try:
        rc = proc.wait(timeout)
        status = "ok" if rc == 0 else f"failed (exit {rc})"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # the script, its workers and its redis-server
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        status = f"killed after {timeout:.0f} s"
    return status, round(time.monotonic() - started, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds for the whole run (default 3600, 900 with --quick)")
    parser.add_argument("--only", default="", help="comma-separated script names")
    args = parser.parse_args()
    budget = args.budget or (900.0 if args.quick else 3600.0)
    only = {s for s in args.only.split(",") if s}
    deadline = time.monotonic() + budget
    results = new_results(args)
    runs: dict[str, dict[str, object]] = {}
    for name, cap in SCRIPTS:
        if only and name not in only:
            continue
        script = BENCH / f"{name}.py"
        if not script.exists():
            runs[name] = {"status": "skipped: no such script yet"}
            continue
        left = deadline - time.monotonic()
        if left < 10:
            runs[name] = {"status": "skipped: the budget ran out"}
            continue
        print(f"== {name}", flush=True)
        status, seconds = run(script, args.quick, min(left, cap / 5 if args.quick else cap))
        runs[name] = {"status": status, "seconds": seconds}
        print(f"   {status} in {seconds} s", flush=True)
    plot = subprocess.run([sys.executable, str(BENCH / "plot.py")], capture_output=True,
                          text=True, check=False, timeout=300)
    table = subprocess.run([sys.executable, str(BENCH / "summary.py")], capture_output=True,
                           text=True, check=False, timeout=60)
    results["runs"] = runs
    results["plots"] = plot.stdout.splitlines()
    results["summary"] = "bench/results/summary.md" if table.returncode == 0 else table.stderr
    write_results("run_all", results)


if __name__ == "__main__":
    main()
