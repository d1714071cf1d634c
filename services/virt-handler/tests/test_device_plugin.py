"""Device plugins register with a (fake) kubelet over a real unix socket, then serve it."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from blockbuster import blockbuster_ctx
from grpclib.client import Channel
from grpclib.exceptions import GRPCError
from grpclib.server import Server
from virt_handler import DeviceKind, DevicePluginManager
from virt_handler.deviceplugin_api.pluginregistration import (
    InfoRequest,
    RegistrationStatus,
)
from virt_handler.deviceplugin_api.pluginregistration import RegistrationStub as WatcherStub
from virt_handler.deviceplugin_api.v1beta1 import (
    AllocateRequest,
    ContainerAllocateRequest,
    DevicePluginStub,
    Empty,
    RegisterRequest,
    RegistrationBase,
)


class FakeKubelet(RegistrationBase):
    def __init__(self) -> None:
        self.requests: list[RegisterRequest] = []

    async def register(self, message: RegisterRequest) -> Empty:
        self.requests.append(message)
        return Empty()


@pytest.fixture
async def kubelet(tmp_path: Path) -> AsyncIterator[tuple[Path, FakeKubelet]]:
    plugins = tmp_path / "dp"
    plugins.mkdir()
    fake = FakeKubelet()
    server = Server([fake])
    fd = os.open(plugins, os.O_PATH | os.O_DIRECTORY)
    await server.start(path=f"/proc/self/fd/{fd}/kubelet.sock")
    yield plugins, fake
    server.close()
    await server.wait_closed()
    os.close(fd)


# /dev/null stands in for a host device every machine has.
NULL = DeviceKind("devices.kubevirt.io/null", "/dev/null", "/dev/null")
MISSING = DeviceKind("devices.kubevirt.io/absent", "/dev/does-not-exist", "/dev/absent")


async def test_plugins_register_with_the_kubelet_and_list_their_devices(
    kubelet: tuple[Path, FakeKubelet], tmp_path: Path
) -> None:
    plugins, fake = kubelet
    manager = DevicePluginManager(plugins, tmp_path / "nodes", kinds=[NULL], max_devices=5)
    await manager.sync_once()
    try:
        assert manager.ready
        [req] = fake.requests
        assert (req.version, req.resource_name, req.endpoint) == (
            "v1beta1",
            "devices.kubevirt.io/null",
            "kubevirt-null.sock",
        )
        fd = os.open(plugins, os.O_PATH | os.O_DIRECTORY)
        channel = Channel(path=f"/proc/self/fd/{fd}/{req.endpoint}")
        try:
            stub = DevicePluginStub(channel, timeout=5)
            async for listing in stub.list_and_watch(Empty()):
                assert [d.id for d in listing.devices] == [f"null{i}" for i in range(5)]
                assert {d.health for d in listing.devices} == {"Healthy"}
                break
            reply = await stub.allocate(
                AllocateRequest(
                    container_requests=[ContainerAllocateRequest(devices_ids=["null3"])]
                )
            )
            [spec] = reply.container_responses[0].devices
            assert spec.container_path == "/dev/null"
            node = os.stat(spec.host_path)
            # A 0666 copy of the host node, so a non-root launcher can open it.
            assert stat.S_ISCHR(node.st_mode)
            assert stat.S_IMODE(node.st_mode) == 0o666
            assert node.st_rdev == os.stat("/dev/null").st_rdev
        finally:
            channel.close()
            os.close(fd)
    finally:
        await manager.close()


async def test_unknown_device_ids_are_refused_with_the_field_path(
    kubelet: tuple[Path, FakeKubelet], tmp_path: Path
) -> None:
    plugins, _ = kubelet
    manager = DevicePluginManager(plugins, tmp_path / "nodes", kinds=[NULL], max_devices=2)
    await manager.sync_once()
    fd = os.open(plugins, os.O_PATH | os.O_DIRECTORY)
    channel = Channel(path=f"/proc/self/fd/{fd}/kubevirt-null.sock")
    try:
        with pytest.raises(GRPCError, match=r"container_requests\[0\].devices_ids"):
            await DevicePluginStub(channel, timeout=5).allocate(
                AllocateRequest(
                    container_requests=[ContainerAllocateRequest(devices_ids=["null9"])]
                )
            )
    finally:
        channel.close()
        os.close(fd)
        await manager.close()


async def test_a_missing_host_device_is_advertised_unhealthy(
    kubelet: tuple[Path, FakeKubelet], tmp_path: Path
) -> None:
    plugins, _ = kubelet
    manager = DevicePluginManager(plugins, tmp_path / "nodes", kinds=[MISSING], max_devices=1)
    await manager.sync_once()
    try:
        plugin = manager.plugins[MISSING.resource]
        assert [d.health for d in plugin.devices()] == ["Unhealthy"]
    finally:
        await manager.close()


async def test_a_restarted_kubelet_gets_the_plugins_registered_again(
    kubelet: tuple[Path, FakeKubelet], tmp_path: Path
) -> None:
    plugins, _fake = kubelet
    manager = DevicePluginManager(plugins, tmp_path / "nodes", kinds=[NULL], max_devices=1)
    await manager.sync_once()
    # A new kubelet wipes the plugin sockets and recreates its own.
    os.unlink(plugins / "kubevirt-null.sock")
    second = FakeKubelet()
    server = Server([second])
    os.unlink(plugins / "kubelet.sock")
    fd = os.open(plugins, os.O_PATH | os.O_DIRECTORY)
    await server.start(path=f"/proc/self/fd/{fd}/kubelet.sock")
    try:
        await manager.sync_once()
        assert [r.resource_name for r in second.requests] == [NULL.resource]
        assert (plugins / "kubevirt-null.sock").is_socket()
    finally:
        await manager.close()
        server.close()
        await server.wait_closed()
        os.close(fd)


async def test_the_kubelets_plugin_watcher_learns_the_plugin_and_reports_back(
    tmp_path: Path,
) -> None:
    registry = tmp_path / "reg"
    registry.mkdir()
    manager = DevicePluginManager(
        tmp_path / "unused", tmp_path / "nodes", kinds=[NULL], max_devices=3, registry_dir=registry
    )
    await manager.sync_once()
    fd = os.open(registry, os.O_PATH | os.O_DIRECTORY)
    channel = Channel(path=f"/proc/self/fd/{fd}/kubevirt-null.sock")
    try:
        watcher = WatcherStub(channel, timeout=5)
        info = await watcher.get_info(InfoRequest())
        assert (info.type, info.name, info.supported_versions) == (
            "DevicePlugin",
            NULL.resource,
            ["v1beta1"],
        )
        assert info.endpoint == str(registry / "kubevirt-null.sock")
        assert not manager.ready
        await watcher.notify_registration_status(RegistrationStatus(plugin_registered=True))
        assert manager.ready
        # The same socket serves the device-plugin API the kubelet then dials.
        async for listing in DevicePluginStub(channel, timeout=5).list_and_watch(Empty()):
            assert len(listing.devices) == 3
            break
    finally:
        channel.close()
        os.close(fd)
        await manager.close()


async def test_serving_registering_and_stopping_make_no_blocking_call_on_the_loop(
    kubelet: tuple[Path, FakeKubelet], tmp_path: Path
) -> None:
    plugins, fake = kubelet
    manager = DevicePluginManager(plugins, tmp_path / "nodes", kinds=[NULL], max_devices=1)
    with blockbuster_ctx():
        await manager.sync_once()
        plugin = manager.plugins[NULL.resource]
        assert [d.health for d in plugin.devices()] == ["Healthy"]
        await manager.close()
    assert [r.resource_name for r in fake.requests] == [NULL.resource]
    assert not (plugins / NULL.endpoint).exists()  # its socket went with it
