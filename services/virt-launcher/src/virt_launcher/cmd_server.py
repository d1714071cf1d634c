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
    DomainInterface,
    DomainReason,
    DomainResponse,
    DomainState,
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
    PingRequest,
    PingResponse,
    ShutdownRequest,
    SyncVirtualMachineRequest,
    VmiRef,
    VmiRequest,
    options_from_request,
)

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
from virt_launcher.states import DomainStatus
from virt_launcher.stats import to_domain_stats

__all__ = ["MAX_VMI_JSON", "CmdService", "to_domain"]

_T = TypeVar("_T")

# A VMI is a few KiB; anything this large is not one.
MAX_VMI_JSON = 4 * 1024 * 1024


def to_domain(status: DomainStatus, domain_xml: str = "") -> Domain:
    """The protocol's Domain for a launcher status."""
    return Domain(
        name=status.name,
        uuid=status.uuid,
        state=DomainState(int(status.state)),
        reason=DomainReason(int(status.reason)),
        domain_xml=domain_xml,
        interfaces=[
            DomainInterface(name=n.name, mac=n.mac, target_device=n.tap) for n in status.interfaces
        ],
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
    ) -> None:
        self._identity = identity
        self._manager = manager
        self._builder = builder
        self._dhcp = DhcpServers() if dhcp is None else dhcp
        self._grace_period = default_grace_period
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

    async def _respond(self, status: DomainStatus | None) -> DomainResponse:
        return DomainResponse(domain=None if status is None else to_domain(status))

    # -- Cmd -----------------------------------------------------------------------

    async def sync_virtual_machine(self, message: SyncVirtualMachineRequest) -> DomainResponse:
        """Convert the VMI, serve the guest DHCP, define the domain if needed and start it."""
        self._check_ref(message.vmi)
        vmi = self._decode_vmi(message.vmi_json)
        try:
            options = options_from_request(message.options, message.networks)
        except (InvalidOptionsError, InvalidNetworkError) as exc:
            raise _rejected(exc.field, exc.message) from None
        try:
            domain_xml = await asyncio.to_thread(self._builder, vmi, options)
        except VmiRejectedError as exc:
            raise _rejected(f"vmi_json.{exc.field}", exc.message) from None
        # Before the domain starts, as upstream: the guest's first DISCOVER finds a server.
        await self._serve_dhcp(vmi, options.pod_networks)
        grace = vmi.get("spec", {}).get("terminationGracePeriodSeconds")
        if isinstance(grace, int) and grace >= 0:
            self._grace_period = grace
        return await self._respond(await self._call(lambda: self._manager.sync(domain_xml)))

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
        """Ask the guest to reboot."""
        self._check_ref(message.vmi)
        return await self._respond(await self._call(self._manager.soft_reboot))

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
            return DomainResponse(domain=to_domain(status, xml))

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

    async def get_guest_info(self, message: GetGuestInfoRequest) -> GetGuestInfoResponse:
        """No guest agent channel is read yet: reports the agent as not connected."""
        return GetGuestInfoResponse(info=GuestInfo(agent_connected=False))

    async def get_qemu_version(self, message: GetQemuVersionRequest) -> GetQemuVersionResponse:
        """QEMU's version as libvirt reports it."""
        self._check_ready()
        version = await self._call(self._manager.hypervisor_version)
        return GetQemuVersionResponse(version=version)

    async def ping(self, message: PingRequest) -> PingResponse:
        """The launcher process answers (whatever the guest does)."""
        return PingResponse()
