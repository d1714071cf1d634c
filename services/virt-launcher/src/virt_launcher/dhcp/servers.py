"""The launcher's DHCP servers: started once per interface on SyncVirtualMachine, stopped at exit.

Upstream guards its start with a marker file (`dhcp_started-<iface>`) because its server
goroutine cannot be asked whether it runs; here the running servers are known in memory,
and a start that failed is tried again on the next sync.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from kubevirt_api import VirtualMachineInstance
from virt_domain.podnetwork import PodNetwork

from virt_launcher.dhcp.offer import vmi_offers
from virt_launcher.dhcp.resolvconf import RESOLV_CONF, parse_resolv_conf
from virt_launcher.dhcp.server import DHCP_SERVER_PORT, DhcpServer

__all__ = ["DhcpServers"]


class DhcpServers:
    """Every DHCP server of this launcher, by VMI interface name."""

    def __init__(self, resolv_conf: Path = Path(RESOLV_CONF), port: int = DHCP_SERVER_PORT) -> None:
        self._resolv_conf = resolv_conf
        self._port = port
        self._running: dict[str, DhcpServer] = {}
        self._lock = asyncio.Lock()

    @property
    def interfaces(self) -> tuple[str, ...]:
        """The interfaces being served."""
        return tuple(self._running)

    async def ensure(self, vmi: VirtualMachineInstance, networks: Sequence[PodNetwork]) -> None:
        """Start a server for each network with a lease that has none yet.

        Raises DhcpConfigError (a bad ``dhcpOptions`` value or resolv.conf search list) or
        DhcpStartError (the socket could not be bound); servers already running stay.
        """
        async with self._lock:
            missing = [
                n for n in networks if n.lease is not None and n.interface not in self._running
            ]
            if not missing:
                return
            text = await asyncio.to_thread(self._resolv_conf.read_text, encoding="utf-8")
            for offer in vmi_offers(vmi, missing, parse_resolv_conf(text)):
                server = DhcpServer(offer, self._port)
                await server.start()
                self._running[offer.interface] = server

    def close(self) -> None:
        """Stop every server."""
        for server in self._running.values():
            server.close()
        self._running.clear()
