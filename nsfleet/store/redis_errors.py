"""redis-py's exceptions turned into the domain's: the store is the only layer that knows Redis."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MasterDownError, ReadOnlyError, RedisClusterException, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from nsfleet.domain.errors import StoreFailed, StoreUnavailable

_C = TypeVar("_C", bound=type)
_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])
# What a failover answers meanwhile: a write that reached the old master, now a replica, or a
# replica that lost its master. redis-py raises them as their own classes for a plain command,
# but inside a script or a pipeline as a ResponseError carrying the error code.
_FAILOVER_CODES = re.compile(r"-(READONLY|MASTERDOWN) ")


def unavailable(exc: RedisError | RedisClusterException) -> bool:
    """Whether ``exc`` means the store cannot take the call now (try again), not that it failed."""
    return (isinstance(exc, RedisConnectionError | RedisTimeoutError | RedisClusterException
                       | ReadOnlyError | MasterDownError)
            or _FAILOVER_CODES.search(str(exc)) is not None)


def translated(fn: _F) -> _F:
    """``fn`` raises the domain's StoreUnavailable / StoreFailed instead of redis-py's
    exceptions, so no caller above the store needs to know Redis."""
    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        # RedisClusterException (no node reachable, slot not covered) is no RedisError.
        except (RedisError, RedisClusterException) as exc:
            if unavailable(exc):
                raise StoreUnavailable(str(exc) or type(exc).__name__) from exc
            raise StoreFailed(str(exc) or type(exc).__name__) from exc
    return cast(_F, call)


def translating_redis_errors(cls: _C) -> _C:
    """Every public coroutine of ``cls`` is ``translated``."""
    for name, fn in list(vars(cls).items()):
        if not name.startswith("_") and inspect.iscoroutinefunction(fn):
            setattr(cls, name, translated(fn))
    return cls
