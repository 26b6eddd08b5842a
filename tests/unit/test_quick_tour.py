"""The README's quick tour works as written: its commands find nsfleet, its order-conf example
names groups that serve the topic in the layout its own simulate command builds, and the report
it writes is ignored by git."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from nsfleet.client.queues import parse_order_conf
from nsfleet.simulate.plan import make_plan

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Step:
    command: str
    said: str  # the comment lines just above it, and its own trailing comment


def tour_steps() -> list[Step]:
    """The tour's commands in order (continuation lines joined), each with its comments."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Quick tour", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    steps, above = [], []
    for line in block.replace("\\\n", " ").splitlines():
        stripped = line.strip()
        if not stripped:
            above = []
        elif stripped.startswith("#"):
            above.append(stripped)
        else:
            command, _, trailing = stripped.partition("  #")
            steps.append(Step(command.strip(), "\n".join([*above, trailing])))
            above = []
    return steps


def quick_tour() -> list[str]:
    return [step.command for step in tour_steps()]


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
    out = next(c for c in quick_tour() if "nsfleet analytics" in c)
    report = re.search(r"--out (\S+)", out).group(1)  # type: ignore[union-attr]
    done = subprocess.run(["git", "check-ignore", "-q", f"{report}/summary.md"], cwd=REPO,
                          check=False)
    assert done.returncode == 0, f"{report}/ is not in .gitignore"


def test_the_fleet_wide_change_history_is_where_the_audit_trail_points() -> None:
    text = (REPO / "docs" / "security.md").read_text()
    audit = text.split("Audit trail:", 1)[1].split("\n\n", 1)[0]
    assert "nsfleet admin changes" in audit and "GET /v1/changes" in audit


def test_what_runs_until_ctrl_c_is_not_backgrounded_or_bounded() -> None:
    """Workers and the simulation run in terminals of their own until Ctrl-C: a --duration (or a
    background job) would end the brokers before the later steps look at them."""
    simulate = next(c for c in quick_tour() if c.startswith("nsfleet simulate "))
    assert "--duration" not in simulate and not simulate.endswith("&")
    assert all(not c.endswith("&") for c in quick_tour())


def test_the_spark_extra_goes_in_a_venv_of_its_own() -> None:
    """Installing it into .venv-serve would reinstall nsfleet under the running workers."""
    commands = quick_tour()
    installs = [c for c in commands if "pip install" in c]
    assert installs and all(".venv-serve" not in c for c in installs)
    venv = re.search(r"python3 -m venv (\S+) && \1/bin/pip install '\.\[spark\]'",
                     " ".join(installs))
    assert venv, installs
    analytics = next(c for c in commands if "nsfleet analytics" in c)
    assert analytics.startswith(f"{venv.group(1)}/bin/nsfleet analytics")
    if shutil.which("git") is not None and (REPO / ".git").exists():
        done = subprocess.run(["git", "check-ignore", "-q", f"{venv.group(1)}/bin/python"],
                              cwd=REPO, check=False)
        assert done.returncode == 0, f"{venv.group(1)}/ is not in .gitignore"


def test_the_second_worker_joins_without_a_url_copied_by_hand() -> None:
    """Worker 2 finds worker 1's embedded Redis through the data directory (issue 40): no
    --redis-url, nor a port to read off worker 1's log."""
    serves = [c for c in quick_tour() if c.startswith("nsfleet serve")]
    assert len(serves) == 2, serves
    for command in serves:
        assert "--redis-url" not in command and "--data-dir" not in command, command
        assert "<" not in command, command
    assert "--http-port" in serves[1] and "--remoting-port" in serves[1]
