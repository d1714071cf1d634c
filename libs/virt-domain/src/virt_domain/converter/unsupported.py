"""Refuse, up front and by field, what this converter cannot serve.

Each entry names a feature that needs a component the cluster does not run (a device
plugin, DRA, a sidecar) or that is not built yet; silently dropping it would give the
user a different machine than the one asked for.
"""

from __future__ import annotations

from ..errors import ConversionError
from ..schema import Domain
from .context import Context

__all__ = ["configure"]

_HOOK_ANNOTATION = "hooks.kubevirt.io/hookSidecars"


def configure(ctx: Context, domain: Domain) -> None:
    """Raise `ConversionError` for the first unsupported field found."""
    devices = ctx.devices
    spec = ctx.domain_spec
    refusals: tuple[tuple[object, str, str], ...] = (
        (devices.gpus, "spec.domain.devices.gpus", "GPUs need a GPU device plugin, which this cluster does not run"),
        (devices.host_devices, "spec.domain.devices.hostDevices", "host devices need a device plugin, which this cluster does not run"),
        (ctx.vmi.spec.resource_claims, "spec.resourceClaims", "DRA resource claims are not supported"),
        (devices.filesystems, "spec.domain.devices.filesystems", "virtiofs filesystems are not supported yet"),
        (devices.downward_metrics, "spec.domain.devices.downwardMetrics", "the downward metrics channel is not served"),
        (devices.client_passthrough, "spec.domain.devices.clientPassthrough", "USB client passthrough is not supported"),
        (spec.launch_security, "spec.domain.launchSecurity", "confidential computing (SEV/TDX) is not supported"),
        (spec.cpu.numa if spec.cpu else None, "spec.domain.cpu.numa", "guest NUMA mapping is not supported yet"),
        (spec.cpu.realtime if spec.cpu else None, "spec.domain.cpu.realtime", "realtime vCPUs are not supported yet"),
    )  # fmt: skip
    for value, field, reason in refusals:
        if value:
            raise ConversionError(field, reason)
    annotations = ctx.vmi.metadata.annotations if ctx.vmi.metadata else None
    if annotations and _HOOK_ANNOTATION in annotations:
        raise ConversionError(
            f"metadata.annotations[{_HOOK_ANNOTATION}]",
            "sidecar hooks are not supported: the domain they would rewrite cannot be previewed or served",
        )
