"""The seam between a VMI (JSON from virt-handler) and the domain XML the launcher defines.

The launcher never builds domain XML itself: the default builder is virt_domain's
converter, fed with the launcher's layout. A builder rejects a VMI it cannot serve
with :class:`VmiRejectedError` naming the field path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["BuildOptions", "DomainBuilder", "VmiRejectedError"]


class VmiRejectedError(ValueError):
    """The VMI cannot be turned into a domain: ``field`` is the path, ``message`` why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class BuildOptions:
    """Facts from virt-handler that the VMI does not carry (SyncOptions, decoded)."""

    use_emulation: bool = False
    serial_console_log: bool = True
    mem_balloon_stats_period: int = 10
    smbios: Mapping[str, str] | None = None


class DomainBuilder(Protocol):
    """Turns a VMI (a kubevirt.io/v1 object as a dict) into libvirt domain XML."""

    def __call__(self, vmi: Mapping[str, Any], options: BuildOptions) -> str:
        """Return the domain XML or raise VmiRejectedError."""
        ...
