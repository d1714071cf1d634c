"""Every converter option the handler chooses reaches the launcher's converter unchanged."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

from kube_runtime import EventRecorder, KubeClient, SharedInformer, WorkQueue
from virt_domain import ConverterOptions, SMBiosInfo
from virt_domain.podnetwork import Binding, PodNetwork
from virt_handler.launcher import LauncherConnection
from virt_handler.notify import VmiIdentity
from virt_handler.podfiles import PodFiles
from virt_handler.vmi_sync import GuestRecord, SyncSettings, VmiSync, converter_options
from virt_rpc import DomainResponse, SyncVirtualMachineRequest, VmiRef, options_from_request

HANDLER_OPTIONS = ConverterOptions(
    use_emulation=True,
    block_volumes=frozenset({"data"}),
    hotplug_volumes=frozenset({"added"}),
    container_disk_formats={"root": "raw"},
    tap_devices={"default": "tap7"},
    dedicated_cpus=(2, 3),
    smbios=SMBiosInfo(manufacturer="Acme", family="F", product="P", sku="S", version="1"),
    memballoon_stats_period=5,
    free_page_reporting=False,
    serial_console_log=False,
    pod_networks=(
        PodNetwork("default", Binding.MASQUERADE, "tap7", "k6t-eth0", "02:00:00:00:00:07", 1400),
    ),
)


class _Informer:
    def add_handler(self, handler: Any) -> None:
        pass


class _Cmd:
    def __init__(self) -> None:
        self.requests: list[SyncVirtualMachineRequest] = []

    async def sync_virtual_machine(
        self, request: SyncVirtualMachineRequest, **_call_options: object
    ) -> DomainResponse:
        self.requests.append(request)
        return DomainResponse()


class _Connection:
    def __init__(self) -> None:
        self.cmd = _Cmd()


def _sync(options: ConverterOptions) -> VmiSync:
    informer = cast(SharedInformer[Any], _Informer())
    return VmiSync(
        cast(KubeClient, None),
        informer,
        informer,
        WorkQueue("t"),
        PodFiles(Path("/nonexistent")),
        cast(EventRecorder, None),
        SyncSettings(node="n1"),
        options=lambda: options,
    )


async def _sent(options: ConverterOptions) -> ConverterOptions:
    sync = _sync(options)
    connection = _Connection()
    ref = VmiRef(namespace="ns", name="vm", uid="u1")
    record = GuestRecord(VmiIdentity("ns", "vm", "u1"))
    raw = {"metadata": {"namespace": "ns", "name": "vm", "uid": "u1"}, "spec": {}}
    await sync._sync_call(raw, record, cast(LauncherConnection, connection), ref, options)
    (request,) = connection.cmd.requests
    # What the launcher decodes from the bytes it receives.
    wire = SyncVirtualMachineRequest.parse(bytes(request))
    return options_from_request(wire.options, wire.networks)


async def test_each_converter_option_arrives_from_the_handler() -> None:
    stock = ConverterOptions()
    # container_disk_images is not the handler's: the launcher finds them in its pod.
    for field in dataclasses.fields(ConverterOptions):
        if field.name == "container_disk_images":
            continue
        assert getattr(HANDLER_OPTIONS, field.name) != getattr(stock, field.name), field.name
    assert await _sent(HANDLER_OPTIONS) == HANDLER_OPTIONS


async def test_the_handler_sends_what_it_always_sent() -> None:
    sent = await _sent(converter_options(use_emulation=True))
    assert sent == ConverterOptions(
        use_emulation=True, serial_console_log=True, memballoon_stats_period=0
    )
    assert (await _sent(converter_options(use_emulation=False))).use_emulation is False
