"""The RocketMQ C++ client from PyPI (``rocketmq-python-cvs``, librocketmq 2.x bundled for Linux
x86_64), which the ``test`` extra installs there."""

from __future__ import annotations

import os
import platform
import sys
from typing import NoReturn

import pytest


def missing(reason: str) -> NoReturn:
    """Skip a test of the C++ client where it cannot be had; fail in CI on Linux x86_64, where
    the test extra installs it, so a broken install never passes as a skip."""
    if os.environ.get("CI") and sys.platform == "linux" and platform.machine() == "x86_64":
        pytest.fail(f"CI: {reason}")
    pytest.skip(reason)
