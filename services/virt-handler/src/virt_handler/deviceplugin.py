"""Device plugins for devices.kubevirt.io/{kvm,tun,vhost-net} (kubelet device-plugin API v1beta1).

Each plugin serves the `DevicePlugin` service on its own socket in the kubelet's
device-plugins dir, registers it through the kubelet's `Registration` service on
`kubelet.sock`, advertises `max_devices` identical devices (a node device can be shared
by any number of pods, as upstream does) and hands out the device node on `Allocate`.

The launcher runs as uid 107, and a container's device node keeps the host node's
mode, so each plugin hands out its own 0666 copy of the host node (same major/minor)
from the handler's runtime dir, never the host's 0600 original.

The .proto is our own transcription of the kubelet API (proto/k8s/deviceplugin/v1beta1);
its package/service/field names are the wire contract. Every file call (the sockets
through virt_rpc.sockets, the device nodes) runs off the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpclib
from grpclib.client import Channel
from grpclib.const import Status
from grpclib.server import Server
from service_kit import get_logger
from virt_rpc import PinnedSocket, remove_stale_socket, socket_stat

from .deviceplugin_api.pluginregistration import (
    InfoRequest,
    PluginInfo,
    RegistrationBase,
    RegistrationStatus,
    RegistrationStatusResponse,
)
from .deviceplugin_api.v1beta1 import (
    AllocateRequest,
    AllocateResponse,
    ContainerAllocateResponse,
    ContainerPreferredAllocationResponse,
    Device,
    DevicePluginBase,
    DevicePluginOptions,
    DeviceSpec,
    Empty,
    ListAndWatchResponse,
    PreferredAllocationRequest,
    PreferredAllocationResponse,
    PreStartContainerRequest,
    PreStartContainerResponse,
    RegisterRequest,
    RegistrationStub,
)
from .safepath import PinnedDir, open_dir

__all__ = [
    "API_VERSION",
    "DEFAULT_DEVICES",
    "KUBELET_SOCKET",
    "DeviceKind",
    "DevicePlugin",
    "DevicePluginManager",
    "WatcherRegistration",
]

API_VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"

_log = get_logger(__name__)


@dataclass(frozen=True)
class DeviceKind:
    """One resource: its name, the host node it gives out, and where the pod sees it."""

    resource: str
    host_path: str
    container_path: str
    permissions: str = "rw"

    @property
    def short_name(self) -> str:
        return self.resource.rsplit("/", 1)[-1]

    @property
    def endpoint(self) -> str:
        """The plugin's socket file name in the device-plugins dir."""
        return f"kubevirt-{self.short_name}.sock"


DEFAULT_DEVICES: tuple[DeviceKind, ...] = (
    DeviceKind("devices.kubevirt.io/kvm", "/dev/kvm", "/dev/kvm"),
    DeviceKind("devices.kubevirt.io/tun", "/dev/net/tun", "/dev/net/tun"),
    DeviceKind("devices.kubevirt.io/vhost-net", "/dev/vhost-net", "/dev/vhost-net"),
)


def _shared_node(kind: DeviceKind, nodes_dir: Path) -> Path | None:
    """A 0666 character node equal to kind.host_path in nodes_dir; None if the host has none."""
    try:
        st = os.stat(kind.host_path)
    except FileNotFoundError:
        return None
    if not stat.S_ISCHR(st.st_mode):
        return None
    nodes_dir.mkdir(parents=True, exist_ok=True)
    target = nodes_dir / kind.short_name
    try:
        existing = os.lstat(target)
        if stat.S_ISCHR(existing.st_mode) and existing.st_rdev == st.st_rdev:
            os.chmod(target, 0o666)
            return target
        os.unlink(target)
    except FileNotFoundError:
        pass
    os.mknod(target, stat.S_IFCHR | 0o666, st.st_rdev)
    os.chmod(target, 0o666)  # mknod honours the umask
    return target


class DevicePlugin(DevicePluginBase):
    """The DevicePlugin service for one DeviceKind."""

    def __init__(self, kind: DeviceKind, node: Path | None, max_devices: int = 1000) -> None:
        self.kind = kind
        self.node = node
        self.max_devices = max_devices
        self._changed = asyncio.Event()
        self._stopped = False
        self.allocations = 0
        #: The host node was there when last looked at (see DevicePluginManager.sync_once).
        self.healthy = node is not None

    def devices(self) -> list[Device]:
        """Every advertised device; Unhealthy while the host node is missing."""
        health = HEALTHY if self.healthy else UNHEALTHY
        return [
            Device(id=f"{self.kind.short_name}{i}", health=health) for i in range(self.max_devices)
        ]

    def set_healthy(self, healthy: bool) -> None:
        """Record whether the host node exists; streams resend the list when it changed."""
        healthy = healthy and self.node is not None
        if healthy != self.healthy:
            self.healthy = healthy
            self.health_changed()

    def stop(self) -> None:
        """End every ListAndWatch stream."""
        self._stopped = True
        self._changed.set()

    def health_changed(self) -> None:
        """Resend the device list on every stream."""
        self._changed.set()

    async def get_device_plugin_options(self, message: Empty) -> DevicePluginOptions:
        return DevicePluginOptions(pre_start_required=False)

    async def list_and_watch(self, message: Empty) -> AsyncIterator[ListAndWatchResponse]:
        while not self._stopped:
            self._changed.clear()
            yield ListAndWatchResponse(devices=self.devices())
            await self._changed.wait()

    async def get_preferred_allocation(
        self, message: PreferredAllocationRequest
    ) -> PreferredAllocationResponse:
        return PreferredAllocationResponse(
            container_responses=[
                ContainerPreferredAllocationResponse(
                    device_i_ds=list(r.must_include_deviceIDs)
                    + [d for d in r.available_deviceIDs if d not in r.must_include_deviceIDs][
                        : max(0, r.allocation_size - len(r.must_include_deviceIDs))
                    ]
                )
                for r in message.container_requests
            ]
        )

    async def allocate(self, message: AllocateRequest) -> AllocateResponse:
        if self.node is None:
            raise grpclib.GRPCError(
                Status.FAILED_PRECONDITION, f"{self.kind.host_path} does not exist on this node"
            )
        known = {d.id for d in self.devices()}
        responses = []
        for index, request in enumerate(message.container_requests):
            unknown = [d for d in request.devices_ids if d not in known]
            if unknown:
                raise grpclib.GRPCError(
                    Status.INVALID_ARGUMENT,
                    f"container_requests[{index}].devices_ids: unknown devices {unknown[:3]} "
                    f"(valid: {self.kind.short_name}0..{self.kind.short_name}{self.max_devices - 1})",
                )
            # One node serves any number of devices of this kind.
            responses.append(
                ContainerAllocateResponse(
                    devices=[
                        DeviceSpec(
                            container_path=self.kind.container_path,
                            host_path=str(self.node),
                            permissions=self.kind.permissions,
                        )
                    ]
                )
            )
            self.allocations += 1
        return AllocateResponse(container_responses=responses)

    async def pre_start_container(
        self, message: PreStartContainerRequest
    ) -> PreStartContainerResponse:
        return PreStartContainerResponse()


class WatcherRegistration(RegistrationBase):
    """The plugin-watcher side of one plugin: the kubelet asks who we are, then tells us."""

    def __init__(self, kind: DeviceKind, endpoint: str, registered: dict[str, bool]) -> None:
        self.kind = kind
        self.endpoint = endpoint
        self._registered = registered

    async def get_info(self, message: InfoRequest) -> PluginInfo:
        return PluginInfo(
            type="DevicePlugin",
            name=self.kind.resource,
            endpoint=self.endpoint,
            supported_versions=[API_VERSION],
        )

    async def notify_registration_status(
        self, message: RegistrationStatus
    ) -> RegistrationStatusResponse:
        self._registered[self.kind.resource] = message.plugin_registered
        if message.plugin_registered:
            _log.info("device plugin registered with the kubelet", resource=self.kind.resource)
        else:
            _log.warning(
                "the kubelet refused a device plugin",
                resource=self.kind.resource,
                error=message.error,
            )
        return RegistrationStatusResponse()


class DevicePluginManager:
    """Serves and registers every plugin; re-registers when the kubelet restarts.

    Two ways to meet the kubelet: with `registry_dir` (the kubelet's
    `<root>/plugins_registry`, watched by its plugin watcher) each plugin's socket there
    also answers `pluginregistration.Registration`; without it, plugins live in
    `plugins_dir` and call `Register` on its `kubelet.sock`. The first is per kubelet
    root dir; the second is a host-wide path in kubelets up to now.
    """

    def __init__(
        self,
        plugins_dir: Path,
        nodes_dir: Path,
        kinds: Sequence[DeviceKind] = DEFAULT_DEVICES,
        max_devices: int = 1000,
        poll_interval: float = 2.0,
        registry_dir: Path | None = None,
    ) -> None:
        self.registry_dir = registry_dir
        self.plugins_dir = registry_dir if registry_dir is not None else plugins_dir
        self.nodes_dir = nodes_dir
        self.kinds = tuple(kinds)
        self.max_devices = max_devices
        self.poll_interval = poll_interval
        self.plugins: dict[str, DevicePlugin] = {}
        self._servers: dict[str, Server] = {}
        self.registered: dict[str, bool] = {k.resource: False for k in self.kinds}
        self._kubelet_inode: int | None = None

    @property
    def ready(self) -> bool:
        """Every plugin whose host device exists is registered with the current kubelet."""
        present = [r for r, p in self.plugins.items() if p.node is not None]
        return bool(self.plugins) and all(self.registered.get(r) for r in present)

    async def _serve(self, kind: DeviceKind) -> None:
        node = await asyncio.to_thread(_shared_node, kind, self.nodes_dir)
        if node is None:
            _log.warning(
                "device missing on this node", resource=kind.resource, path=str(kind.host_path)
            )
        old = self._servers.pop(kind.resource, None)
        if old is not None:
            old.close()
            await old.wait_closed()
        if kind.resource in self.plugins:
            self.plugins[kind.resource].stop()
        plugin = DevicePlugin(kind, node, self.max_devices)
        services: list[Any] = [plugin]
        if self.registry_dir is not None:
            endpoint = str(self.registry_dir / kind.endpoint)
            services.append(WatcherRegistration(kind, endpoint, self.registered))
        server = Server(services)
        pinned = await asyncio.to_thread(self._clear_endpoint, kind)
        try:
            await server.start(path=pinned.child(kind.endpoint))
        finally:
            pinned.close()
        self.plugins[kind.resource] = plugin
        self._servers[kind.resource] = server

    def _clear_endpoint(self, kind: DeviceKind) -> PinnedDir:
        """The plugins dir, opened, with a stale socket of `kind` removed (blocking)."""
        pinned = open_dir(self.plugins_dir)
        try:
            remove_stale_socket(kind.endpoint, dir_fd=pinned.fd)
        except BaseException:
            pinned.close()
            raise
        return pinned

    def _remove_endpoint(self, kind: DeviceKind) -> None:
        self._clear_endpoint(kind).close()

    def _kubelet_socket(self) -> PinnedSocket:
        with open_dir(self.plugins_dir) as pinned:
            return pinned.socket(KUBELET_SOCKET)

    async def _register(self, kind: DeviceKind) -> None:
        kubelet = await asyncio.to_thread(self._kubelet_socket)
        channel = Channel(path=kubelet.path)
        try:
            await RegistrationStub(channel, timeout=10).register(
                RegisterRequest(
                    version=API_VERSION,
                    endpoint=kind.endpoint,
                    resource_name=kind.resource,
                    options=DevicePluginOptions(pre_start_required=False),
                )
            )
        finally:
            channel.close()
            kubelet.close()
        self.registered[kind.resource] = True
        _log.info("device plugin registered with the kubelet", resource=kind.resource)

    def _kubelet_socket_inode(self) -> int | None:
        if self.registry_dir is not None:
            return 0
        st = socket_stat(self.plugins_dir / KUBELET_SOCKET)
        return None if st is None else st.st_ino

    def _missing_endpoints(self) -> list[DeviceKind]:
        return [k for k in self.kinds if socket_stat(self.plugins_dir / k.endpoint) is None]

    def _host_nodes_present(self) -> dict[str, bool]:
        return {k.resource: os.path.exists(k.host_path) for k in self.kinds}

    async def sync_once(self) -> None:
        """Serve missing plugins and register the unregistered ones (one pass)."""
        inode = await asyncio.to_thread(self._kubelet_socket_inode)
        if inode != self._kubelet_inode:
            # A new kubelet forgot every registration (and removed our sockets).
            self._kubelet_inode = inode
            self.registered = {k.resource: False for k in self.kinds}
        missing = await asyncio.to_thread(self._missing_endpoints)
        for kind in self.kinds:
            if kind in missing or kind.resource not in self._servers:
                self.registered[kind.resource] = False
                await self._serve(kind)
        present = await asyncio.to_thread(self._host_nodes_present)
        for resource, plugin in self.plugins.items():
            plugin.set_healthy(present[resource])
        if inode is None or self.registry_dir is not None:
            return  # the plugin watcher calls us
        for kind in self.kinds:
            if not self.registered[kind.resource]:
                try:
                    await self._register(kind)
                except (TimeoutError, OSError, grpclib.GRPCError) as error:
                    _log.warning(
                        "device plugin registration failed",
                        resource=kind.resource,
                        error=str(error),
                    )

    async def run(self, stop: asyncio.Event) -> None:
        """Keep the plugins served and registered until `stop` is set."""
        await asyncio.to_thread(self.plugins_dir.mkdir, parents=True, exist_ok=True)
        try:
            while not stop.is_set():
                await self.sync_once()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.poll_interval)
        finally:
            await self.close()

    async def close(self) -> None:
        """Stop every plugin server and remove its socket."""
        for plugin in self.plugins.values():
            plugin.stop()
        for resource, server in list(self._servers.items()):
            server.close()
            await server.wait_closed()
            kind = next(k for k in self.kinds if k.resource == resource)
            # A socket of ours only: anything else there (SocketPathError) stays.
            with contextlib.suppress(OSError, ValueError):
                await asyncio.to_thread(self._remove_endpoint, kind)
        self._servers.clear()
