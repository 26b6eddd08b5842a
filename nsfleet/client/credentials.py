"""Secrets for the command-line clients (admin, simulate): read from a file named by an option,
else from the environment. Flags never hold secrets: ``ps`` shows them."""

from __future__ import annotations

import os
from pathlib import Path

TOKEN_ENV = "NSFLEET_TOKEN"  # an HTTP bearer token
ACCESS_KEY_ENV = "NSFLEET_ACCESS_KEY"
SECRET_KEY_ENV = "NSFLEET_SECRET_KEY"


def read_secret(path: str | None, option: str, env: str) -> str | None:
    """The stripped contents of ``path`` if given (ValueError naming ``option`` when it cannot
    be read), else ``$env``, else None."""
    if path:
        try:
            return Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(f"{option}: {exc}") from None
    return os.environ.get(env) or None
