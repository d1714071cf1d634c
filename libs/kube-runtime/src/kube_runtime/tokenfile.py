"""A bearer token kept in a file, re-read as it rotates (as client-go's BearerTokenFile).

Projected service-account tokens expire and the kubelet rewrites the file well before;
a client that read the token once stops working after an hour. A TokenFile re-reads the
file at most every `period` seconds of its clock, off the event loop, and keeps the last
good token when a read fails or finds the file empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from kubernetes_asyncio.client import Configuration

from .clock import Clock, SystemClock
from .errors import KubeconfigError

__all__ = ["TOKEN_REFRESH_PERIOD", "TokenFile"]

TOKEN_REFRESH_PERIOD = 60.0


def _read(path: Path) -> str:
    token = path.read_text().strip()
    if not token:
        raise KubeconfigError(f"token file {path} is empty")
    return token


class TokenFile:
    """The current token of one file; `install` makes a Configuration send it."""

    def __init__(
        self,
        path: Path,
        token: str,
        *,
        period: float = TOKEN_REFRESH_PERIOD,
        clock: Clock | None = None,
    ) -> None:
        self.path = path
        self.token = token
        self._period = period
        self._clock = clock or SystemClock()
        self._read_at = self._clock.monotonic()
        self._lock = asyncio.Lock()

    @classmethod
    async def load(
        cls,
        path: str | os.PathLike[str],
        *,
        period: float = TOKEN_REFRESH_PERIOD,
        clock: Clock | None = None,
    ) -> TokenFile:
        """Read the token once; KubeconfigError when the file is unreadable or empty."""
        file = Path(path)
        try:
            token = await asyncio.to_thread(_read, file)
        except OSError as error:
            raise KubeconfigError(f"cannot read token file {file}: {error.strerror}") from None
        return cls(file, token, period=period, clock=clock)

    async def current(self) -> str:
        """The token, re-read first when `period` has passed since the last read."""
        if self._clock.monotonic() - self._read_at < self._period:
            return self.token
        async with self._lock:
            if self._clock.monotonic() - self._read_at >= self._period:
                # Mid-rotation or briefly unreadable: the last token may still be valid.
                with contextlib.suppress(OSError, KubeconfigError):
                    self.token = await asyncio.to_thread(_read, self.path)
                self._read_at = self._clock.monotonic()
        return self.token

    def install(self, config: Configuration) -> None:
        """Authenticate `config` with this token only (no client certificate, no other user)."""
        config.cert_file = None
        config.key_file = None
        config.username = None
        config.password = None
        config.api_key_prefix.pop("BearerToken", None)
        config.api_key["BearerToken"] = f"Bearer {self.token}"

        async def refresh(configuration: Configuration) -> None:
            configuration.api_key["BearerToken"] = f"Bearer {await self.current()}"

        config.refresh_api_key_hook = refresh
