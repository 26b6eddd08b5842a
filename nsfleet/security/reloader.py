"""Loads the accounts file and the token files, and reloads them when their contents change.

Files are re-read every interval and compared by content, so a Kubernetes Secret mount (whose
files are symlinks swapped atomically through ``..data``, often keeping mtimes) is followed like
a file edited in place. A file that fails to parse keeps the last good snapshot, logged once per
bad version; at start-up a bad file is an error (the worker does not start half-protected).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from pathlib import Path

import structlog

from nsfleet.security.accounts import AccessConfig, AccountsFileError, Scope, Token, add_token
from nsfleet.security.accounts import parse as parse_accounts

log = structlog.get_logger(__name__)


class AccessFiles:
    def __init__(self, accounts_file: str = "",
                 token_files: dict[Scope, str] | None = None) -> None:
        self.accounts_file = accounts_file
        self.token_files = {s: p for s, p in (token_files or {}).items() if p}
        digest, texts = self._read()
        self._seen = digest  # digest of the contents last read, good or bad
        self.current = self._build(texts)  # swapped whole: readers never see half a reload

    @property
    def configured(self) -> bool:
        return bool(self.accounts_file or self.token_files)

    def _read(self) -> tuple[bytes, dict[str, str]]:
        texts: dict[str, str] = {}
        for path in [self.accounts_file, *self.token_files.values()]:
            if path:
                try:
                    texts[path] = Path(path).read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    raise AccountsFileError(f"{path}: {exc}") from None
        digest = hashlib.sha256(repr(sorted(texts.items())).encode()).digest()
        return digest, texts

    def _build(self, texts: dict[str, str]) -> AccessConfig:
        base = AccessConfig()
        if self.accounts_file:
            try:
                base = parse_accounts(texts[self.accounts_file])
            except AccountsFileError as exc:
                raise AccountsFileError(f"{self.accounts_file}: {exc}") from None
        tokens = dict(base.tokens)
        for scope, path in self.token_files.items():
            secret = texts[path].strip()
            add_token(tokens, secret, Token(f"{scope.value}-token-file", scope), path)
        return AccessConfig(base.accounts, base.global_white, tokens)

    def reload(self) -> bool:
        """Re-read the files; True when a new snapshot was taken. A bad version is logged once
        (its digest is remembered like a good one's)."""
        try:
            digest, texts = self._read()
            if digest == self._seen:
                return False
            self._seen = digest
            config = self._build(texts)
        except AccountsFileError as exc:
            log.error("access files not reloaded, keeping the last good ones", error=str(exc))
            return False
        self.current = config
        log.info("access files reloaded", accounts=len(config.accounts),
                 tokens=len(config.tokens))
        return True

    async def watch(self, interval: float, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await stop.wait()
            if not stop.is_set():
                await asyncio.to_thread(self.reload)
