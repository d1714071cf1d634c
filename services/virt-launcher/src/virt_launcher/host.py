"""The launcher's single libvirt connection (Nova's Host, typed and async).

Opening, defining, looking up and event registration all run in the blocking
executor; lifecycle callbacks arrive on the event loop through libvirtaio and are
handed on with ``call_soon_threadsafe`` so they only ever enqueue.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import libvirt

from virt_launcher.errors import DomainNotFoundError, LibvirtUnavailableError
from virt_launcher.events import register_event_loop
from virt_launcher.executor import BlockingExecutor
from virt_launcher.guest import Guest, checked
from virt_launcher.states import LifecycleEvent

__all__ = ["Host"]

LifecycleCallback = Callable[[LifecycleEvent], None]
CloseCallback = Callable[[str], None]
#: (domain name, connected) of a guest agent channel that opened or closed.
AgentCallback = Callable[[str, bool], None]

_CLOSE_REASONS = {0: "error", 1: "end of file", 2: "keepalive timeout", 3: "client closed"}


def _quiet(_ctx: Any, _err: Any) -> None:
    # libvirt prints every error to stderr by default; ours surface as exceptions.
    return None


libvirt.registerErrorHandler(_quiet, None)


class Host:
    """One connection to libvirtd (or the test driver) at ``uri``."""

    def __init__(self, uri: str, executor: BlockingExecutor) -> None:
        self.uri = uri
        self._executor = executor
        self._conn: Any = None
        self._callback_id: int | None = None
        self._agent_callback_id: int | None = None
        self._close_callback = False
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def executor(self) -> BlockingExecutor:
        """The executor all libvirt calls of this connection run in."""
        return self._executor

    async def connect(
        self, on_lifecycle: LifecycleCallback, on_close: CloseCallback | None = None
    ) -> None:
        """Open the connection and subscribe to lifecycle events of every domain.

        ``on_lifecycle`` and ``on_close`` are called on the event loop and must not
        block (enqueue, set an event).
        """
        self._loop = loop = asyncio.get_running_loop()
        register_event_loop()
        self._conn = conn = await self._executor.run(checked(libvirt.open), self.uri)

        def lifecycle(_conn: Any, dom: Any, event: int, detail: int, _opaque: Any) -> None:
            # libvirt keeps name and uuid client-side: no RPC happens here.
            item = LifecycleEvent(
                name=str(dom.name()), uuid=str(dom.UUIDString()), event=event, detail=detail
            )
            loop.call_soon_threadsafe(on_lifecycle, item)

        self._callback_id = await self._executor.run(
            checked(conn.domainEventRegisterAny),
            None,
            libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE,
            lifecycle,
            None,
        )
        if on_close is not None:

            def closed(_conn: Any, reason: int, _opaque: Any) -> None:
                loop.call_soon_threadsafe(on_close, _CLOSE_REASONS.get(reason, str(reason)))

            await self._executor.run(checked(conn.registerCloseCallback), closed, None)
            self._close_callback = True
        if not self.uri.startswith("test:"):
            # Detect a hung libvirtd: 3 unanswered probes 5 s apart close the connection.
            await self._executor.run(checked(conn.setKeepAlive), 5, 3)

    async def watch_agents(self, on_agent: AgentCallback) -> None:
        """Subscribe to guest agent connects and disconnects (called on the event loop)."""
        loop = asyncio.get_running_loop()
        connected = libvirt.VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_CONNECTED

        def agent(_conn: Any, dom: Any, state: int, _reason: int, _opaque: Any) -> None:
            loop.call_soon_threadsafe(on_agent, str(dom.name()), state == connected)

        self._agent_callback_id = await self._executor.run(
            checked(self._connection().domainEventRegisterAny),
            None,
            libvirt.VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE,
            agent,
            None,
        )

    def _connection(self) -> Any:
        if self._conn is None:
            raise LibvirtUnavailableError(f"not connected to {self.uri}")
        return self._conn

    async def define(self, domain_xml: str) -> Guest:
        """Define (or redefine) a persistent domain from its XML."""
        dom = await self._executor.run(checked(self._connection().defineXML), domain_xml)
        return Guest(dom, self._executor)

    async def lookup(self, name: str) -> Guest | None:
        """The domain called ``name``, or None when there is none."""
        try:
            dom = await self._executor.run(checked(self._connection().lookupByName), name)
        except DomainNotFoundError:
            return None
        return Guest(dom, self._executor)

    async def probe_emulator(self) -> None:
        """Have libvirtd probe the host's default QEMU now, ahead of the first define.

        libvirt probes an emulator's capabilities (it runs the binary and queries it over
        QMP) on the first define that needs them and caches the result in this
        libvirtd's private dir, so a pod's first define pays for it: a second or more
        under TCG. Called as soon as the connection is open, the probe runs while the
        launcher finishes starting and virt-handler sets up the pod's network; a define
        that arrives meanwhile waits in libvirt for the same probe, not for another.
        """
        if self.uri.startswith("test:"):
            return  # the test driver runs no emulator
        await self._executor.run(
            checked(self._connection().getDomainCapabilities), None, None, None, None, 0
        )

    async def hypervisor_version(self) -> str:
        """The hypervisor's version as ``major.minor.micro`` (QEMU's, for qemu:// URIs)."""
        number = int(await self._executor.run(checked(self._connection().getVersion)))
        return f"{number // 1_000_000}.{number // 1_000 % 1_000}.{number % 1_000}"

    async def alive(self) -> bool:
        """Whether the connection still answers."""
        if self._conn is None:
            return False
        try:
            return bool(await self._executor.run(checked(self._conn.isAlive)))
        except LibvirtUnavailableError:
            return False

    async def close(self) -> None:
        """Unsubscribe and close the connection; safe to call twice."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        for callback_id in (self._callback_id, self._agent_callback_id):
            if callback_id is not None:
                # The connection may already be gone; closing is what matters.
                with contextlib.suppress(libvirt.libvirtError):
                    await self._executor.run(conn.domainEventDeregisterAny, callback_id)
        self._callback_id = self._agent_callback_id = None
        if self._close_callback:
            # A registered close callback holds a reference on the connection: left in
            # place, the connection outlives close() with its socket and keepalive timer
            # on the loop, and the launcher's exit waits for them until its drain times out.
            with contextlib.suppress(libvirt.libvirtError):
                await self._executor.run(conn.unregisterCloseCallback)
            self._close_callback = False
        with contextlib.suppress(libvirt.libvirtError):
            await self._executor.run(conn.close)
