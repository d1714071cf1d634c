"""The defaults the mutating webhooks apply: kubevirt_api's shared defaulting, per kind.

`Defaulter` is the seam the app takes one of per kind: a function from the object under
review (and whether it is being created) to its defaulted copy. VMs and VMIs use
`kubevirt_api.defaults` (the same rules the controllers use); a migration gets the label
of its VMI so it can be found by selector.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from kubevirt_api.defaults import (
    DefaultingError,
    DefaultsConfig,
    admitted_vmi,
    vm_defaults,
    vmi_defaults,
)
from kubevirt_api.migrations import MIGRATION_FINALIZER, MIGRATION_SELECTOR_LABEL

__all__ = ["Defaulter", "DefaultingError", "default_migration", "default_vm", "default_vmi"]

Defaulter = Callable[[Mapping[str, Any], bool], dict[str, Any]]
_CONFIG = DefaultsConfig()


def default_vmi(
    vmi: Mapping[str, Any],
    create: bool,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
) -> dict[str, Any]:
    """A defaulted copy of a VMI (only on create: a running VMI's spec is fixed).

    As upstream's mutator, a created VMI also gets the VMI controller's finalizer and
    phase Pending, so the controller's first write is one it needs anyway.
    """
    if not create:
        return copy.deepcopy(dict(vmi))
    stamp = now().astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return admitted_vmi(vmi_defaults(vmi, _CONFIG), stamp)


def default_vm(vm: Mapping[str, Any], create: bool) -> dict[str, Any]:
    """A defaulted copy of a VM; a VM naming neither `running` nor `runStrategy` is Halted."""
    out = vm_defaults(vm, _CONFIG, create=create)
    spec = out.get("spec")
    if isinstance(spec, dict) and "running" not in spec and "runStrategy" not in spec:
        spec["runStrategy"] = "Halted"
    return out


def default_migration(migration: Mapping[str, Any], create: bool) -> dict[str, Any]:
    """A migration carries its VMI's name as a label, so it can be found by selector, and
    the migration controller's finalizer, so a cancel after hand-off can finish (upstream)."""
    out = copy.deepcopy(dict(migration))
    spec = out.get("spec")
    name = spec.get("vmiName") if isinstance(spec, dict) else None
    metadata = out.setdefault("metadata", {})
    if not isinstance(metadata, dict):
        return out
    if isinstance(name, str) and name:
        labels = metadata.setdefault("labels", {})
        if isinstance(labels, dict):
            labels[MIGRATION_SELECTOR_LABEL] = name
    finalizers = metadata.setdefault("finalizers", [])
    if create and isinstance(finalizers, list) and MIGRATION_FINALIZER not in finalizers:
        finalizers.append(MIGRATION_FINALIZER)
    return out
