"""Cmd requests are checked before anything reaches libvirt: identity, readiness, the VMI."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

import pytest
from grpclib import GRPCError
from grpclib.const import Status
from kubevirt_api import VirtualMachineInstance
from virt_domain import ConverterOptions, SMBiosInfo
from virt_domain.podnetwork import Binding, DhcpLease, PodNetwork
from virt_launcher import DomainManager, DomainReason, DomainState, DomainStatus
from virt_launcher.cmd_server import MAX_VMI_JSON, CmdService
from virt_launcher.conversion import VmiRejectedError
from virt_launcher.dhcp import DhcpServers, DhcpStartError
from virt_launcher.identity import VmiIdentity, VmiUid
from virt_launcher.live_migration import LiveMigration
from virt_rpc import (
    MigrateRequest,
    MigrationOptions,
    PingRequest,
    SyncOptions,
    SyncVirtualMachineRequest,
    VmiRef,
    VmiRequest,
    networks_to_wire,
    options_to_wire,
)

IDENTITY = VmiIdentity("ns", "vm", VmiUid("uid-1"))
REF = VmiRef(namespace="ns", name="vm", uid="uid-1")


class FakeManager:
    """Records what reaches the domain manager."""

    def __init__(self) -> None:
        self.synced: list[str] = []

    async def sync(self, domain_xml: str) -> DomainStatus:
        self.synced.append(domain_xml)
        return DomainStatus("ns_vm", "u", DomainState.RUNNING, DomainReason.BOOTED)


BUILT_WITH: list[ConverterOptions] = []


def build(vmi: Mapping[str, Any], options: ConverterOptions) -> str:
    BUILT_WITH.append(options)
    if vmi["spec"].get("bad"):
        raise VmiRejectedError("spec.bad", "must not be set")
    return f"<domain emulation='{options.use_emulation}'/>"


class FakeDhcp:
    """Records the networks the launcher was asked to serve."""

    def __init__(self, fail: OSError | None = None) -> None:
        self.served: list[tuple[str, tuple[PodNetwork, ...]]] = []
        self.fail = fail

    async def ensure(self, vmi: VirtualMachineInstance, networks: tuple[PodNetwork, ...]) -> None:
        if self.fail is not None:
            raise self.fail
        self.served.append((vmi.spec.hostname or "", tuple(networks)))


POD_NETWORK = PodNetwork(
    interface="default",
    binding=Binding.MASQUERADE,
    tap="tap0",
    bridge="k6t-eth0",
    mac="02:00:00:aa:bb:01",
    mtu=1450,
    lease=DhcpLease("10.0.2.1", "10.0.2.2", 24, "10.0.2.1"),
)


def service(ready: bool = True, dhcp: FakeDhcp | None = None) -> tuple[CmdService, FakeManager]:
    manager = FakeManager()
    cmd = CmdService(
        IDENTITY,
        cast(DomainManager, manager),
        build,
        default_grace_period=30,
        dhcp=cast(DhcpServers, dhcp or FakeDhcp()),
    )
    if ready:
        cmd.mark_ready()
    return cmd, manager


def vmi(spec: dict[str, Any] | None = None, **meta: str) -> str:
    metadata = {"namespace": "ns", "name": "vm", "uid": "uid-1", **meta}
    return json.dumps(
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": metadata,
            "spec": spec or {},
        }
    )


async def refused(call: Any) -> GRPCError:
    with pytest.raises(GRPCError) as caught:
        await call
    return caught.value


async def test_a_valid_sync_reaches_the_manager() -> None:
    cmd, manager = service()

    reply = await cmd.sync_virtual_machine(SyncVirtualMachineRequest(vmi=REF, vmi_json=vmi()))

    assert reply.domain is not None
    assert reply.domain.name == "ns_vm"
    assert manager.synced == ["<domain emulation='False'/>"]


async def test_the_handlers_options_reach_the_builder_unchanged() -> None:
    cmd, _ = service()
    sent = ConverterOptions(
        use_emulation=True,
        block_volumes=frozenset({"data"}),
        container_disk_formats={"root": "raw"},
        tap_devices={"default": "tap3"},
        dedicated_cpus=(1,),
        smbios=None,
        memballoon_stats_period=0,
        free_page_reporting=False,
        serial_console_log=False,
    )
    BUILT_WITH.clear()

    await cmd.sync_virtual_machine(
        SyncVirtualMachineRequest(vmi=REF, vmi_json=vmi(), options=options_to_wire(sent))
    )

    assert [sent] == BUILT_WITH


async def test_without_options_the_builder_gets_the_converter_defaults() -> None:
    cmd, _ = service()
    BUILT_WITH.clear()

    await cmd.sync_virtual_machine(SyncVirtualMachineRequest(vmi=REF, vmi_json=vmi()))

    assert [ConverterOptions()] == BUILT_WITH
    assert BUILT_WITH[0].smbios == SMBiosInfo()


async def test_an_unknown_disk_format_is_invalid_with_its_field() -> None:
    cmd, manager = service()
    options = SyncOptions(container_disk_formats={"root": "vmdk"})

    error = await refused(
        cmd.sync_virtual_machine(
            SyncVirtualMachineRequest(vmi=REF, vmi_json=vmi(), options=options)
        )
    )

    assert error.status is Status.INVALID_ARGUMENT
    assert str(error.message).startswith("options.container_disk_formats[root]:")
    assert manager.synced == []


async def test_phase_one_networks_reach_the_builder_and_the_dhcp_server() -> None:
    dhcp = FakeDhcp()
    cmd, manager = service(dhcp=dhcp)
    BUILT_WITH.clear()
    spec = {"hostname": "guest", "domain": {"devices": {}}}

    await cmd.sync_virtual_machine(
        SyncVirtualMachineRequest(
            vmi=REF, vmi_json=vmi(spec), networks=networks_to_wire([POD_NETWORK])
        )
    )

    assert BUILT_WITH[0].pod_networks == (POD_NETWORK,)
    assert dhcp.served == [("guest", (POD_NETWORK,))]
    assert len(manager.synced) == 1


async def test_a_bad_network_is_invalid_with_its_field_and_nothing_starts() -> None:
    dhcp = FakeDhcp()
    cmd, manager = service(dhcp=dhcp)
    (wire,) = networks_to_wire([POD_NETWORK])
    wire.mac = "not-a-mac"

    error = await refused(
        cmd.sync_virtual_machine(
            SyncVirtualMachineRequest(vmi=REF, vmi_json=vmi(), networks=[wire])
        )
    )

    assert error.status is Status.INVALID_ARGUMENT
    assert str(error.message).startswith("networks[0].mac:")
    assert (dhcp.served, manager.synced) == ([], [])


async def test_a_dhcp_server_that_cannot_bind_fails_the_sync_before_the_domain_starts() -> None:
    dhcp = FakeDhcp(fail=DhcpStartError(13, "DHCP server on k6t-eth0 port 67: Permission denied"))
    cmd, manager = service(dhcp=dhcp)

    error = await refused(
        cmd.sync_virtual_machine(
            SyncVirtualMachineRequest(
                vmi=REF,
                vmi_json=vmi({"domain": {"devices": {}}}),
                networks=networks_to_wire([POD_NETWORK]),
            )
        )
    )

    assert error.status is Status.FAILED_PRECONDITION
    assert "port 67" in str(error.message)
    assert manager.synced == []


async def test_before_ready_only_ping_answers() -> None:
    cmd, _ = service(ready=False)

    await cmd.ping(PingRequest())
    error = await refused(cmd.pause(VmiRequest(vmi=REF)))

    assert error.status is Status.UNAVAILABLE


async def test_another_vmis_uid_is_refused() -> None:
    cmd, manager = service()
    other = VmiRef(namespace="ns", name="vm", uid="uid-2")

    error = await refused(cmd.sync_virtual_machine(SyncVirtualMachineRequest(vmi=other)))

    assert error.status is Status.FAILED_PRECONDITION
    assert "uid-1" in str(error.message)
    assert manager.synced == []


async def test_a_missing_vmi_ref_is_invalid() -> None:
    cmd, _ = service()

    error = await refused(cmd.kill(VmiRequest()))

    assert error.status is Status.INVALID_ARGUMENT
    assert str(error.message).startswith("vmi:")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("{not json", "vmi_json"),
        ("[]", "vmi_json"),
        (json.dumps({"kind": "Pod", "metadata": {}}), "vmi_json.kind"),
        (json.dumps({"kind": "VirtualMachineInstance"}), "vmi_json.metadata"),
        ("x" * (MAX_VMI_JSON + 1), "vmi_json"),
    ],
)
async def test_malformed_vmis_are_invalid_with_the_field(body: str, field: str) -> None:
    cmd, manager = service()

    error = await refused(
        cmd.sync_virtual_machine(SyncVirtualMachineRequest(vmi=REF, vmi_json=body))
    )

    assert error.status is Status.INVALID_ARGUMENT
    assert str(error.message).startswith(f"{field}:")
    assert manager.synced == []


async def test_a_vmi_whose_metadata_names_another_vmi_is_refused() -> None:
    cmd, _ = service()

    error = await refused(
        cmd.sync_virtual_machine(SyncVirtualMachineRequest(vmi=REF, vmi_json=vmi(uid="uid-9")))
    )

    assert error.status is Status.FAILED_PRECONDITION
    assert "vmi_json.metadata.uid" in str(error.message)


async def test_a_vmi_the_converter_refuses_names_the_field_path() -> None:
    cmd, manager = service()
    body = json.loads(vmi())
    body["spec"]["bad"] = True

    error = await refused(
        cmd.sync_virtual_machine(SyncVirtualMachineRequest(vmi=REF, vmi_json=json.dumps(body)))
    )

    assert error.status is Status.INVALID_ARGUMENT
    assert error.message == "vmi_json.spec.bad: must not be set"
    assert manager.synced == []


async def test_migration_requests_are_checked_before_anything_migrates() -> None:
    cmd, _ = service()  # started without the migration roles
    unwired = await refused(
        cmd.migrate(
            MigrateRequest(vmi=REF, vmi_json=vmi(), options=MigrationOptions(migration_uid="m"))
        )
    )
    assert unwired.status is Status.UNIMPLEMENTED
    wired = CmdService(
        IDENTITY,
        cast(DomainManager, FakeManager()),
        build,
        default_grace_period=30,
        migration=cast(LiveMigration, object()),  # never reached: the request is refused
    )
    wired.mark_ready()
    bad = await refused(
        wired.migrate(
            MigrateRequest(vmi=REF, vmi_json=vmi(), options=MigrationOptions(migration_uid="a/b"))
        )
    )
    assert bad.status is Status.INVALID_ARGUMENT
    assert str(bad.message).startswith("options.migration_uid: ")
    other = await refused(
        cmd.cancel_migration(VmiRequest(vmi=VmiRef(namespace="ns", name="vm", uid="other")))
    )
    assert other.status is Status.FAILED_PRECONDITION
