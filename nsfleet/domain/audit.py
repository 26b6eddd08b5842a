"""The audit trail: one structured log line (logger ``nsfleet.audit``) for every change of the
tables, with the client address that asked (after the PROXY protocol), as Java's namesrv.log
records registrations, unregistrations and config updates, and the account that asked (the
AccessKey or HTTP token name; ``-`` when access control is off). Unchanged heartbeats and
re-registrations stay silent.

Front ends set ``client_address`` and ``client_account`` for each request; they travel with the
request's task.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import structlog

client_address: ContextVar[str] = ContextVar("client_address", default="-")
client_account: ContextVar[str] = ContextVar("client_account", default="-")
_log = structlog.get_logger("nsfleet.audit")


def audit(action: str, **fields: Any) -> None:
    """Log one change of the tables."""
    _log.info(action, audit=True, remote=client_address.get(),
              account=client_account.get(), **fields)
