"""SyncBrokerAgent: a BrokerAgent for threaded code, its event loop running in its own thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from nsfleet.client.broker_agent import BrokerAgent
from nsfleet.client.broker_loop import AgentStats, BrokerIdentity
from nsfleet.domain.model import DataVersion, TopicConfig

T = TypeVar("T")


class SyncBrokerAgent:
    """Same options as :class:`BrokerAgent`. Every method blocks for at most ``timeout`` s."""

    def __init__(self, servers: str | Sequence[str], identity: BrokerIdentity,
                 topics: Iterable[TopicConfig] = (), *, timeout: float = 30.0,
                 **options: Any) -> None:
        self.timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name=f"broker-agent-{identity.broker_addr}")
        self._thread.start()
        topics = list(topics)

        async def make() -> BrokerAgent:  # built inside its loop, like everything it creates
            return BrokerAgent(servers, identity, topics, **options)

        self.agent = self._call(make())

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if not self._thread.is_alive():
            coro.close()
            raise RuntimeError("the agent is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self.timeout)

    def _do(self, fn: Any, *args: Any) -> Any:
        async def run() -> Any:
            return fn(*args)
        return self._call(run())

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> SyncBrokerAgent:
        try:
            self._call(self.agent.start())
        except BaseException:
            self._stop_loop()
            raise
        return self

    def close(self, *, unregister: bool = True) -> bool:
        if not self._thread.is_alive():
            return False
        try:
            return self._call(self.agent.close(unregister=unregister))
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(self.timeout)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> SyncBrokerAgent:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the agent's API ---------------------------------------------------------------------

    def register(self) -> dict[str, Any]:
        return self._call(self.agent.register())

    def heartbeat(self) -> bool:
        return self._call(self.agent.heartbeat())

    def put_topic(self, topic: TopicConfig) -> None:
        self._do(self.agent.put_topic, topic)

    def remove_topic(self, name: str) -> None:
        self._do(self.agent.remove_topic, name)

    def set_topics(self, topics: Iterable[TopicConfig]) -> None:
        self._do(self.agent.set_topics, list(topics))

    @property
    def master_addr(self) -> str | None:
        return self.agent.master_addr

    @property
    def ha_server_addr(self) -> str | None:
        return self.agent.ha_server_addr

    @property
    def data_version(self) -> DataVersion:
        return self._do(lambda: self.agent.data_version)

    @property
    def registered(self) -> bool:
        return self.agent.registered

    @property
    def stats(self) -> AgentStats:
        return self.agent.stats

    @property
    def current_server(self) -> str:
        return self.agent.current_server
