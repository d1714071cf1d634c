"""The ``Cmd`` gRPC service virt-handler calls: one VMI, checked on every request.

Until the domain manager is connected only ``Ping`` (and the handshake) answer;
everything else is UNAVAILABLE. Errors are gRPC status codes with a message that
names the field or the libvirt failure, never a traceback.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from grpclib import GRPCError
from grpclib.const import Status
from kubevirt_api import InvalidObjectError, VirtualMachineInstance, load
from virt_domain.podnetwork import PodNetwork
from virt_rpc import (
    CmdBase,
    Domain,
    DomainDisk,
    DomainInterface,
    DomainReason,
    DomainResponse,
    DomainState,
    FreezeRequest,
    GetDomainRequest,
    GetDomainStatsRequest,
    GetDomainStatsResponse,
    GetGuestInfoRequest,
    GetGuestInfoResponse,
    GetQemuVersionRequest,
    GetQemuVersionResponse,
    GuestInfo,
    InvalidNetworkError,
    InvalidOptionsError,
    MemoryDumpInfo,
    MemoryDumpRequest,
    MigrateRequest,
    MigrationAbortStatus,
    MigrationMetadata,
    MigrationMode,
    PingRequest,
    PingResponse,
    ShutdownRequest,
    SyncVirtualMachineRequest,
    VmiRef,
    VmiRequest,
    options_from_request,
)

from virt_launcher.access_credentials import agent_credentials
from virt_launcher.agent import AgentPoller
from virt_launcher.conversion import DomainBuilder, VmiRejectedError
from virt_launcher.dhcp import DhcpConfigError, DhcpServers
from virt_launcher.domain_manager import DomainManager
from virt_launcher.errors import (
    DomainNotFoundError,
    DomainStateError,
    LibvirtError,
    LibvirtUnavailableError,
)
from virt_launcher.identity import VmiIdentity
from virt_launcher.live_migration import LiveMigration
from virt_launcher.memory_dump import InvalidDumpPathError, MemoryDumper
from virt_launcher.memory_dump_record import MemoryDumpRecord, format_time
from virt_launcher.migration_record import AbortStatus, MigrationRecord
from virt_launcher.migration_record import MigrationMode as RecordMode
from virt_launcher.migration_source import (
    InvalidMigrationOptionsError,
    MigrationRefusedError,
    MigrationSettings,
)
from virt_launcher.states import DomainStatus
from virt_launcher.stats import to_domain_stats

__all__ = ["MAX_VMI_JSON", "CmdService", "to_domain", "to_memory_dump"]

_T = TypeVar("_T")

# A VMI is a few KiB; anything this large is not one.
MAX_VMI_JSON = 4 * 1024 * 1024


_ABORT_STATUS = {
    AbortStatus.NONE: MigrationAbortStatus.UNSPECIFIED,
    AbortStatus.IN_PROGRESS: MigrationAbortStatus.IN_PROGRESS,
    AbortStatus.SUCCEEDED: MigrationAbortStatus.SUCCEEDED,
    AbortStatus.FAILED: MigrationAbortStatus.FAILED,
}
_MODE = {
    RecordMode.PRE_COPY: MigrationMode.PRE_COPY,
    RecordMode.POST_COPY: MigrationMode.POST_COPY,
    RecordMode.PAUSED: MigrationMode.PAUSED,
}


def to_migration(record: MigrationRecord) -> MigrationMetadata:
    """The protocol's MigrationMetadata for a launcher's migration record."""
    return MigrationMetadata(
        uid=record.uid,
        start_timestamp=record.start,
        end_timestamp=record.end,
        failed=record.failed,
        failure_reason=record.failure_reason,
        abort_status=_ABORT_STATUS[record.abort_status],
        mode=_MODE[record.mode],
        completed=record.completed,
    )


def to_memory_dump(record: MemoryDumpRecord) -> MemoryDumpInfo:
    """The protocol's MemoryDumpInfo for a launcher's memory-dump record."""
    return MemoryDumpInfo(
        file_name=record.file_name,
        start_timestamp=format_time(record.start),
        end_timestamp=format_time(record.end),
        completed=record.completed,
        failed=record.failed,
        failure_reason=record.failure_reason,
    )


def to_domain(status: DomainStatus, domain_xml: str = "", guest: GuestInfo | None = None) -> Domain:
    """The protocol's Domain for a launcher status (with the guest agent's report)."""
    return Domain(
        guest=guest,
        name=status.name,
        uuid=status.uuid,
        state=DomainState(int(status.state)),
        reason=DomainReason(int(status.reason)),
        domain_xml=domain_xml,
        interfaces=[
            DomainInterface(name=n.name, mac=n.mac, target_device=n.tap) for n in status.interfaces
        ],
        disks=[DomainDisk(name=d.name, target=d.target) for d in status.disks],
        migration=None if status.migration is None else to_migration(status.migration),
        memory_dump=None if status.memory_dump is None else to_memory_dump(status.memory_dump),
        pod_stopping=status.pod_stopping,
    )


def _rejected(field: str, message: str) -> GRPCError:
    return GRPCError(Status.INVALID_ARGUMENT, f"{field}: {message}")


class CmdService(CmdBase):
    """Serves ``Cmd`` for the VMI ``identity`` through ``manager``."""

    def __init__(
        self,
        identity: VmiIdentity,
        manager: DomainManager,
        builder: DomainBuilder,
        default_grace_period: int,
        dhcp: DhcpServers | None = None,
        agent: AgentPoller | None = None,
        migration: LiveMigration | None = None,
        memory_dumps: MemoryDumper | None = None,
    ) -> None:
        self._identity = identity
        self._manager = manager
        self._builder = builder
        self._dhcp = DhcpServers() if dhcp is None else dhcp
        self._grace_period = default_grace_period
        self._agent = agent
        self._migration = migration
        self._memory_dumps = memory_dumps
        self._ready = asyncio.Event()

    def mark_ready(self) -> None:
        """Accept commands from now on (the domain manager is connected)."""
        self._ready.set()

    # -- checks ------------------------------------------------------------------

    def _check_ready(self) -> None:
        if not self._ready.is_set():
            raise GRPCError(Status.UNAVAILABLE, "the launcher is starting; retry shortly")

    def _check_ref(self, ref: VmiRef | None) -> None:
        self._check_ready()
        if ref is None:
            raise _rejected("vmi", "required: the namespace, name and uid of the VMI")
        mine = self._identity
        if (ref.namespace, ref.name, ref.uid) != (mine.namespace, mine.name, mine.uid):
            raise GRPCError(
                Status.FAILED_PRECONDITION,
                f"this launcher serves VMI {mine.namespace}/{mine.name} (uid {mine.uid}), "
                f"not {ref.namespace}/{ref.name} (uid {ref.uid})",
            )

    def _decode_vmi(self, text: str) -> Mapping[str, Any]:
        if len(text) > MAX_VMI_JSON:
            raise _rejected("vmi_json", f"larger than {MAX_VMI_JSON} bytes")
        try:
            vmi = json.loads(text)
        except ValueError as exc:
            raise _rejected("vmi_json", f"not valid JSON ({exc})") from None
        if not isinstance(vmi, dict):
            raise _rejected("vmi_json", "must be a JSON object (a VirtualMachineInstance)")
        if vmi.get("kind") != "VirtualMachineInstance":
            raise _rejected("vmi_json.kind", "must be 'VirtualMachineInstance'")
        meta = vmi.get("metadata")
        if not isinstance(meta, dict):
            raise _rejected("vmi_json.metadata", "required: an object with namespace, name, uid")
        mine = self._identity
        for key, want in (("namespace", mine.namespace), ("name", mine.name), ("uid", mine.uid)):
            if meta.get(key) != want:
                raise GRPCError(
                    Status.FAILED_PRECONDITION,
                    f"vmi_json.metadata.{key}: {meta.get(key)!r} is not this launcher's {want!r}",
                )
        return vmi

    async def _call(self, work: Callable[[], Awaitable[_T]]) -> _T:
        try:
            return await work()
        except (DomainNotFoundError, DomainStateError) as exc:
            raise GRPCError(Status.FAILED_PRECONDITION, str(exc)) from None
        except LibvirtUnavailableError as exc:
            raise GRPCError(Status.UNAVAILABLE, f"libvirt: {exc}") from None
        except LibvirtError as exc:
            raise GRPCError(Status.INTERNAL, f"libvirt: {exc}") from None
        except MigrationRefusedError as exc:
            raise GRPCError(Status.FAILED_PRECONDITION, str(exc)) from None

    async def _respond(self, status: DomainStatus | None) -> DomainResponse:
        return DomainResponse(domain=None if status is None else to_domain(status))

    # -- Cmd -----------------------------------------------------------------------

    async def sync_virtual_machine(self, message: SyncVirtualMachineRequest) -> DomainResponse:
        """Convert the VMI, serve the guest DHCP, define the domain if needed and start it."""
        domain_xml = await self._convert(message, self._builder)
        return await self._respond(await self._call(lambda: self._manager.sync(domain_xml)))

    async def _convert(self, message: SyncVirtualMachineRequest, builder: DomainBuilder) -> str:
        """The domain XML for the request's VMI, its disks' files written and its DHCP
        served (before the domain starts, as upstream: the first DISCOVER finds a server)."""
        self._check_ref(message.vmi)
        vmi = self._decode_vmi(message.vmi_json)
        try:
            options = options_from_request(message.options, message.networks)
        except (InvalidOptionsError, InvalidNetworkError) as exc:
            raise _rejected(exc.field, exc.message) from None
        try:
            domain_xml = await asyncio.to_thread(builder, vmi, options)
        except VmiRejectedError as exc:
            raise _rejected(f"vmi_json.{exc.field}", exc.message) from None
        await self._serve_dhcp(vmi, options.pod_networks)
        grace = vmi.get("spec", {}).get("terminationGracePeriodSeconds")
        if isinstance(grace, int) and grace >= 0:
            self._grace_period = grace
        if self._agent is not None:
            self._agent.set_credentials(agent_credentials(vmi))
        return domain_xml

    async def _serve_dhcp(self, vmi: Mapping[str, Any], networks: tuple[PodNetwork, ...]) -> None:
        if all(n.lease is None for n in networks):
            return
        try:
            typed = await asyncio.to_thread(load, VirtualMachineInstance, dict(vmi))
            await self._dhcp.ensure(typed, networks)
        except InvalidObjectError as exc:
            raise _rejected("vmi_json", str(exc)) from None
        except DhcpConfigError as exc:
            if exc.field.startswith("spec."):
                raise _rejected(f"vmi_json.{exc.field}", exc.message) from None
            raise GRPCError(Status.FAILED_PRECONDITION, str(exc)) from None
        except OSError as exc:  # DhcpStartError, or resolv.conf unreadable
            raise GRPCError(Status.FAILED_PRECONDITION, str(exc)) from None

    def close(self) -> None:
        """Stop what the commands started beside the domain (the DHCP servers)."""
        self._dhcp.close()

    async def pause(self, message: VmiRequest) -> DomainResponse:
        """Pause the guest's vCPUs."""
        self._check_ref(message.vmi)
        return await self._respond(await self._call(self._manager.pause))

    async def unpause(self, message: VmiRequest) -> DomainResponse:
        """Resume the guest's vCPUs."""
        self._check_ref(message.vmi)
        return await self._respond(await self._call(self._manager.unpause))

    async def soft_reboot(self, message: VmiRequest) -> DomainResponse:
        """Ask the guest to reboot: through its agent when one is connected, else ACPI."""
        self._check_ref(message.vmi)
        via_agent = self._agent is not None and self._agent.connected
        return await self._respond(
            await self._call(lambda: self._manager.soft_reboot(via_agent=via_agent))
        )

    async def reset(self, message: VmiRequest) -> DomainResponse:
        """Hard-reset the guest."""
        self._check_ref(message.vmi)
        return await self._respond(await self._call(self._manager.reset))

    async def shutdown(self, message: ShutdownRequest) -> DomainResponse:
        """ACPI power-off; destroyed when the grace period ends."""
        self._check_ref(message.vmi)
        grace = message.grace_period_seconds
        period = self._grace_period if grace is None else grace
        return await self._respond(await self._call(lambda: self._manager.shutdown(period)))

    async def kill(self, message: VmiRequest) -> DomainResponse:
        """Destroy the domain at once."""
        self._check_ref(message.vmi)
        return await self._respond(await self._call(self._manager.kill))

    async def delete(self, message: VmiRequest) -> DomainResponse:
        """Undefine the domain (destroying it first if it runs)."""
        self._check_ref(message.vmi)
        await self._call(self._manager.delete)
        return DomainResponse()

    async def get_domain(self, message: GetDomainRequest) -> DomainResponse:
        """The domain's state and live XML, or nothing when it is not defined."""
        self._check_ready()

        async def read() -> DomainResponse:
            status = await self._manager.status()
            if status is None:
                return DomainResponse()
            xml = await self._manager.domain_xml() or ""
            return DomainResponse(domain=to_domain(status, xml, self._guest_info()))

        return await self._call(read)

    async def get_domain_stats(self, message: GetDomainStatsRequest) -> GetDomainStatsResponse:
        """CPU, vCPU, memory, block and network counters; unset when the guest is not running."""
        self._check_ready()
        found = await self._call(self._manager.stats)
        if found is None:
            return GetDomainStatsResponse()
        raw, domain_xml = found
        now = datetime.datetime.now(datetime.UTC)
        return GetDomainStatsResponse(stats=to_domain_stats(raw, domain_xml, now))

    def _guest_info(self) -> GuestInfo:
        return GuestInfo(agent_connected=False) if self._agent is None else self._agent.info

    async def get_guest_info(self, message: GetGuestInfoRequest) -> GetGuestInfoResponse:
        """The guest agent's last report (agent_connected false: no agent is connected)."""
        return GetGuestInfoResponse(info=self._guest_info())

    async def freeze(self, message: FreezeRequest) -> DomainResponse:
        """Freeze the guest's filesystems through its agent (FAILED_PRECONDITION: none)."""
        self._check_ref(message.vmi)
        agent = self._require_agent()
        timeout = message.unfreeze_timeout_seconds
        await self._call(lambda: agent.freeze(timeout))
        return await self._respond(await self._call(self._manager.status))

    async def unfreeze(self, message: VmiRequest) -> DomainResponse:
        """Thaw the guest's filesystems through its agent."""
        self._check_ref(message.vmi)
        agent = self._require_agent()
        await self._call(agent.unfreeze)
        return await self._respond(await self._call(self._manager.status))

    def _require_agent(self) -> AgentPoller:
        if self._agent is None or not self._agent.connected:
            raise GRPCError(Status.FAILED_PRECONDITION, "the guest agent is not connected")
        return self._agent

    async def memory_dump(self, message: MemoryDumpRequest) -> DomainResponse:
        """Start dumping the guest's memory to ``dump_path``; the result comes in
        Domain.memory_dump. A repeated request for the same file does nothing."""
        self._check_ready()
        if self._memory_dumps is None:
            raise GRPCError(Status.UNIMPLEMENTED, "this launcher was started without memory dumps")
        dumps = self._memory_dumps
        try:
            await self._call(lambda: dumps.start(message.dump_path))
        except InvalidDumpPathError as exc:
            raise _rejected("dump_path", str(exc)) from None
        return await self._respond(await self._call(self._manager.status))

    async def get_qemu_version(self, message: GetQemuVersionRequest) -> GetQemuVersionResponse:
        """QEMU's version as libvirt reports it."""
        self._check_ready()
        version = await self._call(self._manager.hypervisor_version)
        return GetQemuVersionResponse(version=version)

    # -- live migration ------------------------------------------------------------

    def _migrations(self) -> LiveMigration:
        if self._migration is None:
            raise GRPCError(Status.UNIMPLEMENTED, "this launcher was started without migration")
        return self._migration

    async def prepare_migration_target(self, message: SyncVirtualMachineRequest) -> DomainResponse:
        """Prepare the disks' files, the proxy directory and DHCP for the incoming domain."""
        migration = self._migrations()
        domain_xml = await self._convert(message, migration.target_builder)
        await self._call(lambda: migration.target.prepare(domain_xml))
        return await self._respond(await self._call(self._manager.status))

    async def migrate(self, message: MigrateRequest) -> DomainResponse:
        """Start migrating the running domain; the result comes in Domain.migration."""
        self._check_ref(message.vmi)
        migration = self._migrations()
        vmi = self._decode_vmi(message.vmi_json)
        try:
            settings = MigrationSettings.from_options(message.options)
        except InvalidMigrationOptionsError as exc:
            raise _rejected(exc.field, exc.message) from None
        await self._call(lambda: migration.source.start(vmi, settings))
        return await self._respond(await self._call(self._manager.status))

    async def cancel_migration(self, message: VmiRequest) -> DomainResponse:
        """Abort the running migration (abort_status InProgress, then Succeeded/Failed)."""
        self._check_ref(message.vmi)
        await self._call(self._migrations().source.cancel)
        return await self._respond(await self._call(self._manager.status))

    async def finalize_migration(self, message: VmiRequest) -> DomainResponse:
        """Finish the move on the target once its domain runs (idempotent)."""
        self._check_ref(message.vmi)
        await self._call(self._migrations().target.finalize)
        return await self._respond(await self._call(self._manager.status))

    async def ping(self, message: PingRequest) -> PingResponse:
        """The launcher process answers (whatever the guest does)."""
        return PingResponse()
