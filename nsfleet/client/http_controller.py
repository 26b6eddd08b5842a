"""RocketMQ 5's controller through an nsfleet fleet's HTTP API (/v1/controller/...;
``client/name_service.py`` has the interface)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from nsfleet.client.http import ApiError, FleetHttp, path
from nsfleet.domain.errors import ResponseCode

FIRST_CONTROLLER_CODE = ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH


class HttpController:
    def __init__(self, http: FleetHttp) -> None:
        self.http = http

    async def _call(self, method: str, *parts: str, body: Any = None) -> Any:
        try:
            reply = await self.http.request(method, path("v1", "controller", *parts),
                                            json_body=body)
        except ApiError as exc:
            if exc.code < FIRST_CONTROLLER_CODE:  # not the controller's refusal: as answered
                raise
            # Worded as over remoting, so a refusal reads the same whichever protocol.
            raise ApiError(exc.status, exc.code, f"response code {exc.code}: {exc}") from None
        return reply.json()

    async def metadata(self) -> dict[str, Any]:
        return dict(await self._call("GET", "metadata"))

    async def config(self) -> dict[str, str]:
        return dict((await self._call("GET", "config"))["config"])

    async def update_config(self, values: dict[str, str]) -> None:
        await self._call("PUT", "config", body=values)

    async def broker_sets(self, names: Sequence[str]) -> list[dict[str, Any]]:
        if not names:
            return list((await self._call("GET", "broker-sets"))["brokerSets"])

        async def one(name: str) -> dict[str, Any] | None:
            try:
                return dict(await self._call("GET", "broker-sets", name))
            except ApiError as exc:
                if exc.status == 404:  # as GET_SYNC_STATE_DATA, which leaves it out
                    return None
                raise

        found = await asyncio.gather(*(one(n) for n in dict.fromkeys(names)))
        return [s for s in found if s is not None]

    async def import_set(self, broker_set: dict[str, Any],
                         grace_seconds: float) -> dict[str, Any]:
        return dict(await self._call("PUT", "broker-sets", broker_set["brokerName"],
                                     body={**broker_set, "graceSeconds": grace_seconds}))

    async def elect(self, broker_name: str, broker_id: int) -> dict[str, Any]:
        return dict(await self._call("POST", "broker-sets", broker_name, "elect",
                                     body={"brokerId": broker_id}))

    async def clean(self, broker_name: str, broker_ids: Sequence[int],
                    living: bool) -> dict[str, Any]:
        return dict(await self._call("POST", "broker-sets", broker_name, "clean",
                                     body={"brokerIds": list(broker_ids),
                                           "cleanLivingBroker": living}))
