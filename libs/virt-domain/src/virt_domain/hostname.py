"""The guest's hostname, as upstream's `dns.SanitizeHostname` gives it to the launcher pod."""

from __future__ import annotations

from kubevirt_api import VirtualMachineInstance

__all__ = ["guest_hostname"]


def guest_hostname(vmi: VirtualMachineInstance) -> str:
    """``spec.hostname``, else the VMI name's first label cut to 63 characters."""
    if vmi.spec.hostname:
        return vmi.spec.hostname
    name = (vmi.metadata.name if vmi.metadata else None) or ""
    return name.split(".")[0][:63]
