"""A libvirt domain behind intention-named async methods (Nova's Guest, typed).

Every call runs in the launcher's blocking executor; callers never see libvirt
flags or ``libvirt.libvirtError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

import libvirt
import libvirt_qemu

from virt_launcher.errors import (
    DomainNotFoundError,
    DomainStateError,
    LibvirtError,
    LibvirtUnavailableError,
)
from virt_launcher.executor import BlockingExecutor
from virt_launcher.states import DomainStatus, decode_state

__all__ = ["GUEST_INFO_TYPES", "USER_INFO_TYPES", "Guest", "translate_error"]

#: What `guest_info` asks libvirt for (libvirt 9.0 has no LOAD: asking for it fails the
#: whole call); users are asked for on their own, more often.
GUEST_INFO_TYPES = (
    libvirt.VIR_DOMAIN_GUEST_INFO_OS
    | libvirt.VIR_DOMAIN_GUEST_INFO_HOSTNAME
    | libvirt.VIR_DOMAIN_GUEST_INFO_TIMEZONE
    | libvirt.VIR_DOMAIN_GUEST_INFO_INTERFACES
)
USER_INFO_TYPES = libvirt.VIR_DOMAIN_GUEST_INFO_USERS

_P = ParamSpec("_P")
_T = TypeVar("_T")

# virErrorNumber values that callers act on.
_NO_DOMAIN = {libvirt.VIR_ERR_NO_DOMAIN}
_BAD_STATE = {libvirt.VIR_ERR_OPERATION_INVALID}
_FLAG_REFUSED = {libvirt.VIR_ERR_NO_SUPPORT, libvirt.VIR_ERR_INVALID_ARG}
_UNAVAILABLE = {libvirt.VIR_ERR_SYSTEM_ERROR, libvirt.VIR_ERR_RPC, libvirt.VIR_ERR_NO_CONNECT}


def translate_error(exc: Any) -> LibvirtError:
    """Turn a ``libvirt.libvirtError`` into the facade's exception of the right kind."""
    code = int(exc.get_error_code() or 0)
    message = str(exc.get_error_message() or exc)
    if code in _NO_DOMAIN:
        return DomainNotFoundError(message, code)
    if code in _BAD_STATE:
        return DomainStateError(message, code)
    if code in _UNAVAILABLE:
        return LibvirtUnavailableError(message, code)
    return LibvirtError(message, code)


def checked(fn: Callable[_P, _T]) -> Callable[_P, _T]:
    """Wrap a blocking libvirt call so it raises the facade's errors."""

    def call(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return fn(*args, **kwargs)
        except libvirt.libvirtError as exc:
            raise translate_error(exc) from None

    return call


class Guest:
    """One defined domain. Cheap to create; holds no state besides the handle."""

    def __init__(self, domain: Any, executor: BlockingExecutor) -> None:
        self._dom = domain
        self._executor = executor
        # Name and uuid are held client-side by libvirt: reading them never blocks.
        self.name: str = str(domain.name())
        self.uuid: str = str(domain.UUIDString())

    async def _run(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        return await self._executor.run(checked(fn), *args, **kwargs)

    async def launch(self, paused: bool = False) -> None:
        """Start the defined domain (optionally with its vCPUs paused)."""
        flags = libvirt.VIR_DOMAIN_START_PAUSED if paused else 0
        await self._run(self._dom.createWithFlags, flags)

    async def pause(self) -> None:
        """Suspend the vCPUs; memory stays allocated."""
        await self._run(self._dom.suspend)

    async def resume(self) -> None:
        """Resume paused vCPUs."""
        await self._run(self._dom.resume)

    async def shutdown(self) -> None:
        """Ask the guest to power off (ACPI power button or agent); returns at once."""
        await self._run(self._dom.shutdown)

    async def reboot(self, via_agent: bool = False) -> None:
        """Ask the guest to reboot: through its agent (guest-shutdown, mode reboot) or as
        libvirt chooses (the ACPI power button)."""
        # 0 is libvirt's default: the ACPI button while no agent is connected.
        await self._run(self._dom.reboot, libvirt.VIR_DOMAIN_REBOOT_GUEST_AGENT if via_agent else 0)

    async def agent_command(
        self, command: str, arguments: Mapping[str, object] | None = None, wait: int = 10
    ) -> object:
        """Run one guest agent command (waiting up to ``wait`` seconds) and return its
        ``return`` value (decoded JSON)."""
        message: dict[str, object] = {"execute": command}
        if arguments:
            message["arguments"] = dict(arguments)
        reply = await self._run(
            libvirt_qemu.qemuAgentCommand, self._dom, json.dumps(message), wait, 0
        )
        decoded = json.loads(reply) if reply else {}
        return decoded.get("return") if isinstance(decoded, dict) else None

    async def guest_info(self, types: int) -> dict[str, object]:
        """libvirt's typed guest agent report (``os.name``, ``if.0.name`` ...)."""
        return dict(await self._run(self._dom.guestInfo, types, 0))

    async def freeze_filesystems(self) -> int:
        """Freeze every guest filesystem through the agent; how many were frozen."""
        return int(await self._run(self._dom.fsFreeze, None, 0))

    async def thaw_filesystems(self) -> int:
        """Thaw the guest filesystems frozen before; how many were thawed."""
        return int(await self._run(self._dom.fsThaw, None, 0))

    async def reset(self) -> None:
        """Hard reset, like the reset button; the guest gets no warning."""
        await self._run(self._dom.reset, 0)

    async def destroy(self) -> None:
        """Stop the domain at once (pull the plug). The definition stays."""
        await self._run(self._dom.destroy)

    async def undefine(self) -> None:
        """Remove the definition (and its NVRAM file, if any) of a stopped domain."""
        try:
            await self._run(self._dom.undefineFlags, libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
        except LibvirtError as exc:
            # Drivers without NVRAM support refuse the flag; plain undefine is enough there.
            if exc.code not in _FLAG_REFUSED:
                raise
            await self._run(self._dom.undefine)

    async def status(self) -> DomainStatus:
        """The domain's current state and reason."""
        state, reason = await self._run(self._dom.state)
        ours, why = decode_state(int(state), int(reason))
        return DomainStatus(name=self.name, uuid=self.uuid, state=ours, reason=why)

    async def is_active(self) -> bool:
        """Whether the domain runs (running, paused, ...), as opposed to shut off."""
        return bool(await self._run(self._dom.isActive))

    async def stats(self) -> dict[str, object]:
        """libvirt's bulk statistics of the domain (``cpu.time``, ``block.0.rd.bytes`` ...)."""

        def collect() -> dict[str, object]:
            # connect() hands back the domain's own connection object: no RPC.
            records = self._dom.connect().domainListGetStats([self._dom], 0, 0)
            return dict(records[0][1]) if records else {}

        return await self._run(collect)

    async def xml(self) -> str:
        """The live domain XML (the persistent one while the domain is shut off)."""
        return str(await self._run(self._dom.XMLDesc, 0))

    # -- hotplug -------------------------------------------------------------------

    async def _device_flags(self) -> int:
        # A persistent domain's definition follows its live devices (upstream's
        # LIVE|CONFIG); a transient one has no definition to change.
        persistent = bool(await self._run(self._dom.isPersistent))
        config: int = libvirt.VIR_DOMAIN_AFFECT_CONFIG if persistent else 0
        return int(libvirt.VIR_DOMAIN_AFFECT_LIVE) | config

    async def attach_disk(self, disk_xml: str) -> None:
        """Add the ``<disk>`` to the running guest (and to the definition, if persistent)."""
        await self._run(self._dom.attachDeviceFlags, disk_xml, await self._device_flags())

    async def detach_disk(self, disk_xml: str) -> None:
        """Remove the ``<disk>`` (found by its target) from the running guest and the
        definition. Returns once libvirt sent the request; the guest may take a moment
        to let go of the device."""
        await self._run(self._dom.detachDeviceFlags, disk_xml, await self._device_flags())

    # -- memory dump ---------------------------------------------------------------

    async def dump_memory(self, path: str) -> None:
        """Write the guest's memory (no disk contents) to ``path`` as a raw ELF core;
        returns when the file is complete. libvirt pauses the vCPUs meanwhile and
        resumes them after. Holds an executor thread for the whole dump."""
        await self._run(
            self._dom.coreDumpWithFormat,
            path,
            libvirt.VIR_DOMAIN_CORE_DUMP_FORMAT_RAW,
            libvirt.VIR_DUMP_MEMORY_ONLY,
        )

    # -- live migration ------------------------------------------------------------

    async def migratable_xml(self) -> str:
        """The live XML as the destination must recreate it (libvirt's MIGRATABLE form)."""
        return str(await self._run(self._dom.XMLDesc, libvirt.VIR_DOMAIN_XML_MIGRATABLE))

    async def migrate(self, dest_uri: str, params: dict[str, object], flags: int) -> None:
        """Run libvirt's peer-to-peer migration to ``dest_uri``; returns when it ends.

        Holds an executor thread for the whole migration; the job is watched and
        aborted from other threads (:meth:`job_stats`, :meth:`abort_job`).
        """
        await self._run(self._dom.migrateToURI3, dest_uri, params, flags)

    async def job_stats(self) -> dict[str, object]:
        """The domain's current job statistics (``type``, ``data_remaining`` ...)."""
        return dict(await self._run(self._dom.jobStats, 0))

    async def abort_job(self) -> None:
        """Abort the domain's running job (a migration is rolled back)."""
        await self._run(self._dom.abortJob)

    async def start_post_copy(self) -> None:
        """Switch the running migration to post-copy (enabled when it started)."""
        await self._run(self._dom.migrateStartPostCopy, 0)

    async def metadata_element(self, uri: str) -> str | None:
        """The metadata element in namespace ``uri`` (current state), or None."""
        try:
            text = await self._run(self._dom.metadata, libvirt.VIR_DOMAIN_METADATA_ELEMENT, uri, 0)
        except LibvirtError as exc:
            if exc.code == libvirt.VIR_ERR_NO_DOMAIN_METADATA:
                return None
            raise
        return str(text)

    async def set_metadata_element(self, element: str, key: str, uri: str) -> None:
        """Replace the metadata element in namespace ``uri`` (prefix ``key``); a running
        domain's live and persistent definitions both change, a stopped one's persistent."""
        flags = libvirt.VIR_DOMAIN_AFFECT_CONFIG
        if await self.is_active():
            flags |= libvirt.VIR_DOMAIN_AFFECT_LIVE
        await self._run(
            self._dom.setMetadata, libvirt.VIR_DOMAIN_METADATA_ELEMENT, element, key, uri, flags
        )
