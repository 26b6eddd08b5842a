"""The store's translation of redis-py's exceptions: what a failover answers (a write reaching a
replica, a replica without its master) is StoreUnavailable (503, try again) whether redis-py
raises it as its own class or, inside a script or a pipeline, as a ResponseError carrying the
code; any other refusal is StoreFailed."""

from __future__ import annotations

import pytest
from redis.exceptions import (
    ConnectionError,
    MasterDownError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
)

from nsfleet.domain.errors import StoreFailed, StoreUnavailable
from nsfleet.store.redis_errors import translating_redis_errors

SCRIPT_ON_REPLICA = ResponseError(
    "Command # 1 (EVALSHA cb5e 3 nsfleet:{acked}) of pipeline caused error: (\"Error running "
    "script (call to f_cb5e): @user_script:600: @user_script: 600: -READONLY You can't write "
    "against a read only replica.\",)")


@translating_redis_errors
class Store:
    async def call(self, exc: BaseException) -> None:
        raise exc


@pytest.mark.parametrize("exc", [
    ConnectionError("refused"), ReadOnlyError("You can't write against a read only replica."),
    MasterDownError("Link with MASTER is down"), RedisClusterException("no node"),
    SCRIPT_ON_REPLICA,
    ResponseError("Error running script: @user_script:9: -MASTERDOWN Link with MASTER is down "),
])
async def test_what_a_failover_answers_is_unavailable(exc: RedisError) -> None:
    with pytest.raises(StoreUnavailable):
        await Store().call(exc)


@pytest.mark.parametrize("exc", [
    ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
    ResponseError("Error running script: @user_script:3: attempt to index a nil value"),
    ResponseError("user data mentions READONLY but is no error code"),
])
async def test_other_refusals_fail(exc: RedisError) -> None:
    with pytest.raises(StoreFailed):
        await Store().call(exc)
