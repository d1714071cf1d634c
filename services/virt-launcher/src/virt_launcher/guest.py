"""A libvirt domain behind intention-named async methods (Nova's Guest, typed).

Every call runs in the launcher's blocking executor; callers never see libvirt
flags or ``libvirt.libvirtError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import libvirt

from virt_launcher.errors import (
    DomainNotFoundError,
    DomainStateError,
    LibvirtError,
    LibvirtUnavailableError,
)
from virt_launcher.executor import BlockingExecutor
from virt_launcher.states import DomainStatus, decode_state

__all__ = ["Guest", "translate_error"]

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

    async def reboot(self) -> None:
        """Ask the guest to reboot (ACPI or agent)."""
        await self._run(self._dom.reboot, 0)

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
