"""Run an aiohttp app and background tasks until SIGTERM/SIGINT, then drain.

A service with no listener (the launcher) passes no app, and then aiohttp is never
imported: it costs a quarter of a second and 13 MiB per process, once per VM there.

Shutdown order: readiness fails at once (so traffic moves away), then, after an
optional ``drain_delay``, the listeners close while in-flight requests finish and
background tasks see their stop event; whatever is still running after
``shutdown_timeout`` is cancelled. A second signal cancels the background tasks
without waiting.
"""

from __future__ import annotations

import asyncio
import signal
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from service_kit.logs import get_logger

if TYPE_CHECKING:
    from aiohttp import web

    from service_kit.health import Health

__all__ = [
    "EXIT_BACKGROUND_FAILED",
    "EXIT_OK",
    "EXIT_START_FAILED",
    "Background",
    "Listener",
    "ServiceRunner",
    "TCPListener",
    "UnixListener",
    "run_service",
]

# A background coroutine gets the stop event and must return soon after it is set.
Background = Callable[[asyncio.Event], Awaitable[None]]

EXIT_OK = 0
EXIT_BACKGROUND_FAILED = 1
EXIT_START_FAILED = 2

_log = get_logger(__name__)


@dataclass(frozen=True)
class TCPListener:
    """Listen on ``host:port`` (port 0 picks a free one), with TLS when ``ssl_context``."""

    host: str
    port: int
    ssl_context: ssl.SSLContext | None = None


@dataclass(frozen=True)
class UnixListener:
    """Listen on a unix socket at ``path``."""

    path: Path


Listener = TCPListener | UnixListener


class ServiceRunner:
    """One service process: its HTTP listeners, its background tasks, its shutdown.

    ``app`` None: no HTTP at all (then ``listeners`` must be empty).
    """

    def __init__(
        self,
        app: web.Application | None,
        listeners: Sequence[Listener],
        *,
        background: Mapping[str, Background] | None = None,
        health: Health | None = None,
        shutdown_timeout: float = 30.0,
        drain_delay: float = 0.0,
        signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
    ) -> None:
        if app is None and listeners:
            raise ValueError("listeners need an app to serve")
        self._app = app
        self._listeners = list(listeners)
        self._background = dict(background or {})
        self._health = health
        self._shutdown_timeout = shutdown_timeout
        self._drain_delay = drain_delay
        self._signals = list(signals)
        self._runner: web.AppRunner | None = None
        if app is not None:
            from aiohttp import web

            self._runner = web.AppRunner(
                app, handle_signals=False, shutdown_timeout=shutdown_timeout, access_log=None
            )
        self._stop = asyncio.Event()
        self._force = asyncio.Event()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._installed: list[signal.Signals] = []
        self._failed: list[str] = []
        self.stop_reason: str | None = None

    @property
    def stop_event(self) -> asyncio.Event:
        """Set once the service has been asked to stop (by a signal or a failure)."""
        return self._stop

    @property
    def addresses(self) -> list[object]:
        """Bound addresses: ``(host, port)`` tuples for TCP, paths for unix sockets."""
        return [] if self._runner is None else list(self._runner.addresses)

    async def start(self) -> None:
        """Bind the listeners, start the background tasks, install signal handlers.

        When a listener cannot bind, whatever was bound is closed again and the
        OSError propagates.
        """
        if self._runner is not None:
            await self._runner.setup()
            try:
                await self._bind(self._runner)
            except BaseException:
                await self._runner.cleanup()
                raise
        for name, body in self._background.items():
            task = asyncio.create_task(self._guard(name, body), name=f"background:{name}")
            self._tasks[name] = task
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            loop.add_signal_handler(sig, self._on_signal, sig)
            self._installed.append(sig)
        _log.info("service started", addresses=[str(a) for a in self.addresses])

    async def _bind(self, runner: web.AppRunner) -> None:
        from aiohttp import web

        for listener in self._listeners:
            site: web.BaseSite
            if isinstance(listener, TCPListener):
                site = web.TCPSite(
                    runner, listener.host, listener.port, ssl_context=listener.ssl_context
                )
            else:
                site = web.UnixSite(runner, str(listener.path))
            await site.start()

    def request_stop(self, reason: str = "requested") -> None:
        """Begin shutdown; a second request while stopping also cancels background work."""
        if self._stop.is_set():
            self._force.set()
            return
        self.stop_reason = reason
        if self._health is not None:
            self._health.start_draining()
        self._stop.set()

    def _on_signal(self, sig: signal.Signals) -> None:
        if self._stop.is_set():
            _log.warning("second signal, cancelling background work", signal=sig.name)
        else:
            _log.info("signal received, shutting down", signal=sig.name)
        self.request_stop(sig.name)

    async def _guard(self, name: str, body: Background) -> None:
        try:
            await body(self._stop)
        except asyncio.CancelledError:
            raise
        except Exception:
            _log.exception("background task failed", task=name)
            self._failed.append(name)
            self.request_stop(f"background task {name} failed")
            return
        if not self._stop.is_set():
            _log.error("background task ended before shutdown", task=name)
            self._failed.append(name)
            self.request_stop(f"background task {name} ended")

    async def wait(self) -> int:
        """Wait for a stop request, drain, and return the process exit code."""
        try:
            await self._stop.wait()
            if self._drain_delay > 0:
                # Gives endpoint controllers time to see /readyz fail; cut short by a 2nd signal.
                try:
                    async with asyncio.timeout(self._drain_delay):
                        await self._force.wait()
                except TimeoutError:
                    pass
            closing = () if self._runner is None else (self._runner.cleanup(),)
            await asyncio.gather(*closing, self._drain_background())
        finally:
            self._remove_signal_handlers()
        code = EXIT_BACKGROUND_FAILED if self._failed else EXIT_OK
        _log.info("service stopped", reason=self.stop_reason, exit_code=code)
        return code

    async def _drain_background(self) -> None:
        pending = {t for t in self._tasks.values() if not t.done()}
        if pending:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self._shutdown_timeout
            force = asyncio.create_task(self._force.wait())
            try:
                while pending and not force.done():
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    await asyncio.wait(
                        [*pending, force], timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                    )
                    pending = {t for t in pending if not t.done()}
            finally:
                force.cancel()
        stragglers = [t for t in self._tasks.values() if not t.done()]
        for task in stragglers:
            _log.warning("cancelling background task at shutdown", task=task.get_name())
            task.cancel()
        await asyncio.gather(*stragglers, return_exceptions=True)

    def _remove_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._installed:
            loop.remove_signal_handler(sig)
        self._installed.clear()

    async def run(self) -> int:
        """:meth:`start`, then :meth:`wait`; returns the exit code."""
        await self.start()
        return await self.wait()


def run_service(runner: ServiceRunner) -> int:
    """Run ``runner`` in a new event loop and return the process exit code.

    A listener that cannot bind is logged as one line and gives EXIT_START_FAILED.
    Use as ``raise SystemExit(run_service(ServiceRunner(app, listeners, ...)))``.
    """
    try:
        return asyncio.run(runner.run())
    except OSError as exc:
        _log.error("cannot start the service", error=str(exc))
        return EXIT_START_FAILED
