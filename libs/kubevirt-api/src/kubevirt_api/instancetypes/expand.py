"""``expand``: a VM with its instancetype and preference folded into its template.

Upstream's ``expand.Expand``: default volume disks and the pod network interface first
(preferences apply to them), then the instancetype and preference, then the VMI spec
defaults, and the matchers and status refs dropped. What virt-api's expand-spec
subresources, ``virtctl expand`` and ``virtctl convert`` return.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..defaults import (
    DefaultsConfig,
    default_network_interface,
    default_volume_disks,
    vmi_spec_defaults,
)
from ..values import as_map
from ._json import JSON, child, clone
from .apply import apply_to_vmi_spec
from .conflicts import ConflictError

__all__ = ["TEMPLATE_SPEC", "expand_vm"]

#: Where a VM's VMI spec sits (conflict paths of a VM start here).
TEMPLATE_SPEC = "spec.template.spec"


def expand_vm(
    vm: Mapping[str, Any],
    instancetype: Mapping[str, Any] | None,
    preference: Mapping[str, Any] | None,
    config: DefaultsConfig,
) -> JSON:
    """A copy of `vm` expanded with these instancetype and preference specs.

    A VM that names neither comes back unchanged. Raises :class:`ConflictError` when the
    template sets what the instancetype provides, ``DefaultingError`` when the
    configuration forbids a default.
    """
    out: JSON = clone(dict(vm))
    spec = child(out, "spec")
    if spec.get("instancetype") is None and spec.get("preference") is None:
        return out
    template = child(spec, "template")
    tspec = child(template, "spec")
    default_volume_disks(tspec)
    default_network_interface(tspec, config)
    meta = as_map(template.get("metadata"))
    applied = apply_to_vmi_spec(
        TEMPLATE_SPEC, instancetype, preference, tspec, as_map(meta.get("annotations"))
    )
    if applied.conflicts:
        raise ConflictError(applied.conflicts)
    template["spec"] = vmi_spec_defaults(applied.spec, config)
    if applied.annotations:
        child(template, "metadata")["annotations"] = applied.annotations
    spec.pop("instancetype", None)
    spec.pop("preference", None)
    status = out.get("status")
    if isinstance(status, dict):
        status.pop("instancetypeRef", None)
        status.pop("preferenceRef", None)
    return out
