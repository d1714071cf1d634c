"""The seam between a VMI (JSON from virt-handler) and the domain XML the launcher defines.

The launcher never builds domain XML itself: the default builder is virt_domain's
converter, fed with the launcher's layout. A builder rejects a VMI it cannot serve
with :class:`VmiRejectedError` naming the field path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from virt_domain import ConverterOptions

__all__ = ["DomainBuilder", "VmiRejectedError"]


class VmiRejectedError(ValueError):
    """The VMI cannot be turned into a domain: ``field`` is the path, ``message`` why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class DomainBuilder(Protocol):
    """Turns a VMI (a kubevirt.io/v1 object as a dict) into libvirt domain XML."""

    def __call__(self, vmi: Mapping[str, Any], options: ConverterOptions) -> str:
        """Return the domain XML or raise VmiRejectedError.

        ``options`` are virt-handler's, as they came over the wire.
        """
        ...
