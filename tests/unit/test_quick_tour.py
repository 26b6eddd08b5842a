"""The README's quick tour works as written: its commands find nsfleet, its order-conf example
names groups that serve the topic in the layout its own simulate command builds, and the report
it writes is ignored by git."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from nsfleet.client.queues import parse_order_conf
from nsfleet.simulate_plan import make_plan

REPO = Path(__file__).resolve().parents[2]


def quick_tour() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Quick tour", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    # Continuation lines joined, comments dropped: one command per entry.
    joined = block.replace("\\\n", " ")
    return [line.split("  #", 1)[0].strip() for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_the_venv_is_activated_before_the_first_bare_nsfleet() -> None:
    commands = quick_tour()
    first = next(i for i, c in enumerate(commands) if c.startswith("nsfleet "))
    assert "source .venv-serve/bin/activate" in commands[:first]


def test_the_order_conf_example_names_groups_that_serve_the_topic() -> None:
    commands = quick_tour()
    simulate = shlex.split(next(c for c in commands if c.startswith("nsfleet simulate ")))
    opts = {simulate[i]: simulate[i + 1] for i in range(2, len(simulate) - 1)
            if simulate[i].startswith("--")}
    plan = make_plan(int(opts["--brokers"]), int(opts["--topics"]), int(opts["--clusters"]))
    put = shlex.split(next(c for c in commands if c.startswith("nsfleet admin order-conf put")))
    topic, conf = put[4], put[5]
    serving = {b.identity.broker_name for b in plan.brokers
               if any(t.topic_name == topic for t in b.topics)}
    named = {name for name, _ in parse_order_conf(conf)}
    assert named and named <= serving, (named, serving)


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(),
                    reason="not a git checkout")
def test_the_analytics_report_directory_is_ignored_by_git() -> None:
    out = next(c for c in quick_tour() if c.startswith("nsfleet analytics"))
    report = re.search(r"--out (\S+)", out).group(1)  # type: ignore[union-attr]
    done = subprocess.run(["git", "check-ignore", "-q", f"{report}/summary.md"], cwd=REPO,
                          check=False)
    assert done.returncode == 0, f"{report}/ is not in .gitignore"


def test_the_fleet_wide_change_history_is_where_the_audit_trail_points() -> None:
    text = (REPO / "README.md").read_text()
    audit = text.split("Audit trail:", 1)[1].split("\n\n", 1)[0]
    assert "nsfleet admin changes" in audit and "GET /v1/changes" in audit
