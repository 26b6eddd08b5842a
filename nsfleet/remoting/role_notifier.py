"""NOTIFY_BROKER_ROLE_CHANGED (1008): after an election this worker made, every alive replica
of the set is told the new master on its own listen port, oneway (ControllerManager
.notifyBrokerRoleChanged), so the new master takes over without waiting for its next
GET_REPLICA_INFO. A replica that cannot be reached learns it from that poll (every 5 s)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools

import structlog

from nsfleet.domain.controller import Election
from nsfleet.service.controller import election_header
from nsfleet.wire.codec import CURRENT_VERSION, ONEWAY, RemotingCommand, RequestCode, encode_frame
from nsfleet.wire.controller_bodies import sync_state_set

log = structlog.get_logger(__name__)
SEND_TIMEOUT = 3.0  # Java's invokeOneway timeout
_opaque = itertools.count(1)


def role_changed_frame(election: Election) -> bytes:
    return encode_frame(RemotingCommand(
        code=RequestCode.NOTIFY_BROKER_ROLE_CHANGED, flag=ONEWAY, opaque=next(_opaque),
        version=CURRENT_VERSION, ext_fields=election_header(election),
        body=sync_state_set(election.sync_state_set, election.sync_state_set_epoch)))


class RoleNotifier:
    """``ns.controller.on_elected``'s callback: sends in the background."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[None]] = set()

    def __call__(self, election: Election) -> None:
        frame = role_changed_frame(election)
        for addr in election.alive_addresses:
            task = asyncio.create_task(self._send(addr, frame, election.broker_name))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    @staticmethod
    async def _send(addr: str, frame: bytes, broker_name: str) -> None:
        host, _, port = addr.rpartition(":")
        try:
            async with asyncio.timeout(SEND_TIMEOUT):
                _, writer = await asyncio.open_connection(host.strip("[]"), int(port))
                writer.write(frame)
                await writer.drain()
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
        except (OSError, TimeoutError, ValueError) as exc:
            log.warning("could not tell a broker its new role", broker_addr=addr,
                        broker_name=broker_name, error=str(exc) or type(exc).__name__)
