"""TLS material: server and mutual-TLS client contexts that follow rotated files.

Certificates are rotated by rewriting files (Secret volumes, cert-manager). A
:class:`ReloadingContext` keeps one ``ssl.SSLContext`` object alive for the
listener or client and loads the new pair into it when the files change: new
handshakes use the new certificate, established connections are untouched. A
half-written pair (cert and key not matching) is refused and the old one kept.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from service_kit.logs import get_logger

__all__ = [
    "Clock",
    "ReloadingContext",
    "TLSError",
    "TLSFiles",
    "client_context",
    "server_context",
]

_log = get_logger(__name__)


class TLSError(Exception):
    """TLS files that cannot be read or do not form a valid certificate/key pair."""


class Clock(Protocol):
    """What the reload loop needs of time (kube_runtime's clocks fit)."""

    async def sleep(self, seconds: float) -> None:
        """Suspend for ``seconds``."""
        ...


class _AsyncioClock:
    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@dataclass(frozen=True)
class TLSFiles:
    """Paths of a PEM certificate chain, its private key, and optionally a CA bundle.

    For a server the CA verifies client certificates; for a client it verifies the
    server.
    """

    cert: Path | None = None
    key: Path | None = None
    ca: Path | None = None

    def paths(self) -> tuple[Path, ...]:
        return tuple(p for p in (self.cert, self.key, self.ca) if p is not None)


def _load_into(context: ssl.SSLContext, files: TLSFiles) -> None:
    for path in files.paths():
        if not path.is_file():
            raise TLSError(f"{path}: no such file")
    try:
        if files.cert is not None:
            context.load_cert_chain(files.cert, files.key)
        if files.ca is not None:
            context.load_verify_locations(cafile=files.ca)
    except (ssl.SSLError, OSError) as exc:
        names = ", ".join(str(p) for p in files.paths())
        raise TLSError(f"cannot load TLS material from {names}: {exc}") from None


def server_context(
    files: TLSFiles,
    *,
    require_client_cert: bool = False,
    optional_client_cert: bool = False,
    client_ca_pem: str = "",
) -> ssl.SSLContext:
    """A TLS ≥ 1.2 server context serving ``files.cert``/``files.key``.

    With ``require_client_cert`` the peer must present a certificate signed by
    ``files.ca`` or ``client_ca_pem`` (mutual TLS); with ``optional_client_cert`` a
    peer may come without one, but a certificate it offers must be signed by them (an
    aggregated API: the front proxy presents one, webhook callers do not).
    ``client_ca_pem`` is CA text from elsewhere than a file (a ConfigMap); it is loaded
    once, and a reload re-reads only the files. Raises TLSError naming the files when
    they are unusable.
    """
    if files.cert is None or files.key is None:
        raise TLSError("a server needs both cert and key")
    if require_client_cert and optional_client_cert:
        raise TLSError("a client certificate is either required or optional")
    if (require_client_cert or optional_client_cert) and files.ca is None and not client_ca_pem:
        raise TLSError("verifying client certificates needs a ca to verify them with")
    # Only our CA verifies clients: never the system's public roots.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
    elif optional_client_cert:
        context.verify_mode = ssl.CERT_OPTIONAL
    if client_ca_pem:
        try:
            context.load_verify_locations(cadata=client_ca_pem)
        except (ssl.SSLError, ValueError) as exc:
            raise TLSError(f"cannot load the client CA: {exc}") from None
    _load_into(context, files)
    return context


def client_context(files: TLSFiles, *, check_hostname: bool = True) -> ssl.SSLContext:
    """A TLS ≥ 1.2 client context trusting ``files.ca`` (system CAs when None).

    With ``files.cert``/``files.key`` the client presents its certificate (mutual TLS).
    """
    if (files.cert is None) != (files.key is None):
        raise TLSError("a client certificate needs both cert and key")
    if files.ca is None:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    else:
        # A private CA replaces the system roots instead of adding to them.
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = check_hostname
    _load_into(context, files)
    return context


def _fingerprint(files: TLSFiles) -> tuple[bytes, ...]:
    # Content digests, not mtimes: coarse timestamps can miss a quick rewrite in place.
    # Opening follows symlinks, as a Secret volume's ..data swap requires.
    out = []
    for path in files.paths():
        try:
            out.append(hashlib.sha256(path.read_bytes()).digest())
        except OSError:
            out.append(b"")
    return tuple(out)


class ReloadingContext:
    """An SSLContext that reloads its files when they change.

    ``factory`` builds a fresh context from the files (:func:`server_context` or
    :func:`client_context` with their options bound); it validates each new
    version before the live context is updated.
    """

    def __init__(
        self,
        files: TLSFiles,
        factory: Callable[[TLSFiles], ssl.SSLContext],
        *,
        clock: Clock | None = None,
    ) -> None:
        self.files = files
        self._factory = factory
        self._clock: Clock = clock or _AsyncioClock()
        self._seen = _fingerprint(files)
        self.context = factory(files)
        self.reloads = 0

    def reload_if_changed(self) -> bool:
        """Reload when a file changed since the last look; True when it did.

        Blocking (reads files): call it through ``asyncio.to_thread`` on a loop.
        Raises TLSError when the changed files are unusable; the live context then
        keeps serving the previous pair and the same change is retried next time.
        """
        current = _fingerprint(self.files)
        if current == self._seen:
            return False
        # Build a scratch context first: a mismatched pair must not touch the live one.
        self._factory(self.files)
        _load_into(self.context, self.files)
        self._seen = current
        self.reloads += 1
        return True

    async def watch(self, stop: asyncio.Event, interval: float = 10.0) -> None:
        """Poll the files every ``interval`` seconds of the clock until ``stop`` is set.

        Fits :class:`service_kit.ServiceRunner`'s background tasks. Errors are
        logged and retried, never raised.
        """
        while not stop.is_set():
            sleeper = asyncio.ensure_future(self._clock.sleep(interval))
            stopper = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait([sleeper, stopper], return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                stopper.cancel()
            if stop.is_set():
                return
            try:
                if await asyncio.to_thread(self.reload_if_changed):
                    _log.info("TLS material reloaded", files=[str(p) for p in self.files.paths()])
            except TLSError as exc:
                _log.warning("TLS material not reloaded", error=str(exc))
