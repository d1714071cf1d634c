"""virt-api's side of instancetypes: inference, VM admission conflicts and the expand-spec
endpoints.

Upstream's ``webhooks/vm/admitter.ApplyToVM``: an instancetype or preference that cannot
be found is ignored (the VM controller reports it), a spread topology that does not divide
the vCPUs and every conflicting field is refused, and the rest of the VM rules judge the
VM with its instancetype applied.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

from kube_runtime import PERSISTENT_VOLUME_CLAIMS, KubeClient, get_or_none
from kubevirt_api.admission import Cause, CauseType
from kubevirt_api.defaults import DefaultsConfig
from kubevirt_api.instancetypes import (
    TEMPLATE_SPEC,
    Getter,
    Matcher,
    NotFoundError,
    UnknownKindError,
    apply_preference_to_vm,
    apply_to_vmi_spec,
    check_spread_topology,
    expand_vm,
    find_spec,
    find_specs,
    infer_matchers,
    instancetype_matcher,
    preference_matcher,
)
from kubevirt_api.values import as_map

__all__ = ["api_getter", "applied_vm", "expand", "inferred_vm", "preferred_vm"]


def api_getter(api: KubeClient) -> Getter:
    """The instancetype finder's reads, through the API server."""
    return functools.partial(get_or_none, api)


async def inferred_vm(api: KubeClient, vm: Mapping[str, Any]) -> Mapping[str, Any]:
    """The VM with its ``inferFromVolume`` matchers resolved from its PVCs' labels (upstream's
    mutator, before the preference's values). Raises InferenceError (upstream's text)."""

    async def labels_of(name: str, namespace: str) -> Mapping[str, str] | None:
        pvc = await get_or_none(api, PERSISTENT_VOLUME_CLAIMS, name, namespace)
        if pvc is None:
            return None
        labels = as_map(as_map(pvc.get("metadata")).get("labels"))
        return {str(k): str(v) for k, v in labels.items()}

    return await infer_matchers(labels_of, vm)


async def _spec_or_none(
    get: Getter, vm: Mapping[str, Any], matcher: Matcher | None, ref: object
) -> Mapping[str, Any] | None:
    if matcher is None:
        return None
    try:
        return await find_spec(get, vm, matcher, as_map(ref))
    except NotFoundError:
        return None


async def applied_vm(
    api: KubeClient, vm: Mapping[str, Any]
) -> tuple[Mapping[str, Any], list[Cause]]:
    """The VM with its instancetype and preference applied, or the causes refusing it."""
    try:
        itype_matcher, pref_matcher = instancetype_matcher(vm), preference_matcher(vm)
    except UnknownKindError:
        return vm, []  # the offline matcher rules name the kind
    if itype_matcher is None and pref_matcher is None:
        return vm, []
    get = api_getter(api)
    status = as_map(vm.get("status"))
    itype = await _spec_or_none(get, vm, itype_matcher, status.get("instancetypeRef"))
    pref = await _spec_or_none(get, vm, pref_matcher, status.get("preferenceRef"))
    if itype is None and pref is None:
        return vm, []
    spread = check_spread_topology(itype, pref)
    if spread is not None:
        return vm, [Cause(spread.path, spread.message)]
    template = as_map(as_map(vm.get("spec")).get("template"))
    tmeta = as_map(template.get("metadata"))
    applied = apply_to_vmi_spec(
        TEMPLATE_SPEC,
        itype,
        pref,
        as_map(template.get("spec")),
        as_map(tmeta.get("annotations")),
    )
    if applied.conflicts:
        return vm, [Cause(c.path, c.message, CauseType.INVALID) for c in applied.conflicts]
    out: dict[str, Any] = copy.deepcopy(dict(vm))
    out["spec"]["template"]["spec"] = applied.spec
    return out, []


async def expand(
    api: KubeClient, vm: Mapping[str, Any], defaults: DefaultsConfig
) -> Mapping[str, Any]:
    """The expanded VM (upstream's ``Expand``). Raises NotFoundError, UnknownKindError,
    ConflictError and DefaultingError, all ValueError/LookupError with upstream's text."""
    specs = await find_specs(api_getter(api), vm)
    return expand_vm(vm, specs.instancetype, specs.preference, defaults)


async def preferred_vm(api: KubeClient, vm: Mapping[str, Any]) -> Mapping[str, Any]:
    """The VM with what upstream's VM mutator takes from its preference (architecture,
    machine type, storage class), ahead of the VM defaults; a missing one changes nothing."""
    try:
        matcher = preference_matcher(vm)
    except UnknownKindError:
        return vm
    status = as_map(vm.get("status"))
    preference = await _spec_or_none(api_getter(api), vm, matcher, status.get("preferenceRef"))
    return apply_preference_to_vm(preference, vm) if preference is not None else vm
