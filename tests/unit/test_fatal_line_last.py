"""A worker that gives up says so last: the error reports the logging set-up folded (a presence
refresh failing while the embedded Redis kept dying) are written before the fatal line, not at
exit after it (issue 40)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The worker is replaced by one that warns three times (two folded) and then fails for good.
SCRIPT = """
import structlog
import nsfleet.ports
import nsfleet.worker
from nsfleet.cli import main

async def dying(settings, **kwargs):
    log = structlog.get_logger("nsfleet.service.presence")
    for _ in range(3):
        log.warning("presence refresh failed", error="Redis unavailable")
    raise RuntimeError("the embedded Redis exited 6 times within 60 s; giving up")

nsfleet.worker.serve = dying
nsfleet.ports.check_free = lambda settings: None
raise SystemExit(main(["serve", "--redis-url", "redis://127.0.0.1:1"]))
"""


def test_the_fatal_line_is_the_last() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("nsfleet serve: ") and lines[-1].endswith("giving up"), lines
    assert any("presence refresh failed" in line and "repeated=2" in line
               for line in lines[:-1]), lines
