"""The chart's alert rules pass ``promtool check rules`` and their unit tests (alerts_test.yaml,
one firing and one quiet case per alert). Debian's prometheus package provides promtool;
.ci/run installs it, so CI never skips."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).parent
RULES = HERE.parents[1] / "helm" / "nsfleet" / "files" / "alerts.yaml"
RULE_TESTS = HERE / "alerts_test.yaml"
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian: prometheus) missing")


def promtool(*args: str, cwd: Path = HERE) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def test_promtool_checks_the_rules() -> None:
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 8 rules found" in done.stdout


def test_promtool_unit_tests_pass() -> None:
    done = promtool("test", "rules", RULE_TESTS.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    cases = [c for t in yaml.safe_load(RULE_TESTS.read_text())["tests"]
             for c in t["alert_rule_test"]]
    fired = {c["alertname"] for c in cases if c["exp_alerts"]}
    quiet = {c["alertname"] for c in cases if not c["exp_alerts"]}
    assert fired == alerts and quiet == alerts


def test_a_broken_expectation_fails(tmp_path: Path) -> None:
    # A negative control: promtool must notice an alert that does not fire as written.
    broken = RULE_TESTS.read_text().replace("eval_time: 2m\n", "eval_time: 45s\n", 1)
    (tmp_path / "rules.yaml").write_text(RULES.read_text())
    (tmp_path / "t.yaml").write_text(broken.replace("../../helm/nsfleet/files/alerts.yaml",
                                                    "rules.yaml"))
    done = promtool("test", "rules", "t.yaml", cwd=tmp_path)
    assert done.returncode != 0 and "NsfleetStoreUnreachable" in done.stdout + done.stderr
