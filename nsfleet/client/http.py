"""HTTP to a list of nsfleet workers with sticky failover, shared by the agent, the route client
and ``nsfleet admin``.

Like the Java client's NettyRemotingClient, one worker is used until it fails, then the next one
in the list (round robin). Every worker serves the same Redis-backed tables, so a request needs to
reach only one of them. Connection errors, timeouts and 5xx answers fail over; a 4xx answer is the
fleet's definitive reply and is raised as :class:`ApiError` at once.
"""

from __future__ import annotations

import json
import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp

DEFAULT_SERVER = "http://127.0.0.1:8080"
SERVER_ENV = "NSFLEET_SERVER"  # the worker URL(s) when no --server is given


class ApiError(Exception):
    """A worker answered with a 4xx error JSON ``{"code", "error"}``."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class FleetUnavailable(Exception):
    """No worker in the list answered (connection error, timeout or 5xx from each)."""

    def __init__(self, errors: Sequence[tuple[str, str]],
                 answers: Mapping[str, tuple[int, str]] | None = None) -> None:
        self.errors = list(errors)  # (url, what happened) for every worker tried
        # url -> (status, error text) for the workers that did answer, with a 5xx
        self.answers = dict(answers or {})
        detail = "; ".join(f"{url}: {msg}" for url, msg in self.errors)
        super().__init__(f"no nsfleet worker answered ({detail})")


@dataclass(frozen=True, slots=True)
class HttpReply:
    status: int
    headers: Mapping[str, str]  # case-insensitive (aiohttp's CIMultiDictProxy)
    body: bytes
    server: str

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def parse_servers(servers: str | Sequence[str]) -> list[str]:
    """Worker base URLs from a list or a ``,``/``;``-separated string (``;`` as in NAMESRV_ADDR).
    A bare ``host:port`` gets ``http://``."""
    items = servers.replace(";", ",").split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in items:
        url = item.strip().rstrip("/")
        if url:
            out.append(url if "://" in url else f"http://{url}")
    if not out:
        raise ValueError("no server URL given")
    return out


def path(*parts: str) -> str:
    """A URL path with every part percent-encoded (topics such as ``%RETRY%g`` contain '%')."""
    return "/" + "/".join(quote(p, safe="") for p in parts)


def _error_json(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def error_text(status: int, body: bytes) -> str:
    """The ``error`` of a worker's error JSON, else a short HTTP description."""
    message = _error_json(body).get("error")
    return message if isinstance(message, str) else f"HTTP {status}"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__


class FleetHttp:
    """One sticky position in a list of worker URLs, over one aiohttp session."""

    def __init__(self, servers: str | Sequence[str], *, timeout: float = 3.0,
                 session: aiohttp.ClientSession | None = None, shuffle: bool = False,
                 token: str | None = None) -> None:
        self.servers = parse_servers(servers)
        self.timeout = timeout
        # A bearer token for workers with HTTP tokens on (docs/security.md).
        self._auth = {"Authorization": f"Bearer {token}"} if token else {}
        # Java starts at a random index so that clients spread over the namesrvs.
        self._index = random.randrange(len(self.servers)) if shuffle else 0
        self._session = session
        self._own_session = session is None
        self.requests = 0
        self.failovers = 0

    @property
    def current(self) -> str:
        return self.servers[self._index]

    def _next(self) -> None:
        self._index = (self._index + 1) % len(self.servers)
        self.failovers += 1

    def _client(self) -> aiohttp.ClientSession:
        # Created lazily: a session must be created inside the loop that uses it.
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
            self._own_session = True
        return self._session

    async def request(self, method: str, url_path: str, *, json_body: Any = None,
                      params: Mapping[str, str] | None = None,
                      headers: Mapping[str, str] | None = None,
                      attempt_timeout: float | None = None,
                      accept: Collection[int] = (200,)) -> HttpReply:
        """Send to the current worker, failing over through the whole list at most once.
        Statuses in ``accept`` are returned; other 4xx raise ApiError. ``attempt_timeout``
        (default: the client's) bounds each worker's attempt."""
        errors: list[tuple[str, str]] = []
        answers: dict[str, tuple[int, str]] = {}
        client_timeout = aiohttp.ClientTimeout(total=attempt_timeout or self.timeout)
        if self._auth:
            headers = {**self._auth, **(headers or {})}
        for _ in range(len(self.servers)):
            base = self.current
            self.requests += 1
            try:
                async with self._client().request(method, base + url_path, json=json_body,
                                                  params=params, headers=headers,
                                                  timeout=client_timeout) as resp:
                    reply = HttpReply(resp.status, resp.headers, await resp.read(), base)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                errors.append((base, _describe(exc)))
            else:
                if reply.status in accept:
                    return reply
                if reply.status < 500:
                    code = _error_json(reply.body).get("code")
                    raise ApiError(reply.status, code if isinstance(code, int) else reply.status,
                                   error_text(reply.status, reply.body))
                text = error_text(reply.status, reply.body)
                errors.append((base, f"{reply.status} {text}"))
                answers[base] = (reply.status, text)
            self._next()
        raise FleetUnavailable(errors, answers)

    async def close(self) -> None:
        if self._own_session and self._session is not None:
            await self._session.close()
        self._session = None
