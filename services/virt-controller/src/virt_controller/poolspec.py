"""A VirtualMachinePool's pure rules, as upstream's pool controller has them: VM names and
their per-index spec, scale-in order, maxUnavailable, when a VM or VMI is outdated, and
which VMs autohealing replaces."""

from __future__ import annotations

import datetime as dt
import enum
import random
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kube_runtime import RawObject, thaw
from kubevirt_api.enums import VirtualMachinePrintableStatus as Printable
from kubevirt_api.selectors import matches

from .objects import condition, labels, mapping, meta

__all__ = [
    "FAILING_STATUSES",
    "POOL_FINALIZER",
    "REVISION_LABEL",
    "UpdateKind",
    "go_duration",
    "heal_after",
    "indexed_vm_spec",
    "kept_volumes",
    "max_unavailable",
    "name_index",
    "new_vm_names",
    "revision_name",
    "select_by",
    "sort_by_policy",
    "vm_outdated",
    "vmi_update",
]

POOL_FINALIZER = "pool.kubevirt.io/finalizer"
# On a pool's VMs and their template (so on the VMIs): the ControllerRevision they come from.
REVISION_LABEL = "kubevirt.io/vm-pool-revision-name"


def name_index(name: str) -> int | None:
    """The index in `<pool>-<n>`, or None when the name does not end in one."""
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def new_vm_names(pool_name: str, count: int, taken: Callable[[str], bool]) -> list[str]:
    """`count` free names `<pool>-<n>`, lowest index first (any VM of that name takes it)."""
    names: list[str] = []
    index = 0
    while len(names) < count:
        name = f"{pool_name}-{index}"
        if not taken(name):
            names.append(name)
        index += 1
    return names


def revision_name(pool: RawObject) -> str:
    """The ControllerRevision holding the pool's spec at this generation."""
    return f"{meta(pool).get('name')}-{meta(pool).get('generation') or 0}"


def indexed_vm_spec(pool_spec: Mapping[str, Any], index: int) -> dict[str, Any]:
    """The template's VM spec for VM `index`: dataVolumeTemplates (and the volumes naming
    them) get `-<index>`; so do ConfigMap and Secret references (cloud-init secrets too)
    when nameGeneration's appendIndexToConfigMapRefs / appendIndexToSecretRefs ask."""
    spec: dict[str, Any] = thaw(mapping(pool_spec.get("virtualMachineTemplate")).get("spec")) or {}
    suffix = f"-{index}"
    renamed: dict[str, str] = {}
    for dvt in spec.get("dataVolumeTemplates") or ():
        dv_meta = dvt.setdefault("metadata", {})
        if dv_meta.get("name"):
            renamed[dv_meta["name"]] = dv_meta["name"] + suffix
            dv_meta["name"] += suffix
    naming = mapping(pool_spec.get("nameGeneration"))
    config_maps = naming.get("appendIndexToConfigMapRefs") is True
    secrets = naming.get("appendIndexToSecretRefs") is True
    template_spec = mapping(mapping(spec.get("template")).get("spec"))
    for volume in template_spec.get("volumes") or ():
        if isinstance(claim := volume.get("persistentVolumeClaim"), dict):
            if claim.get("claimName") in renamed:
                claim["claimName"] = renamed[claim["claimName"]]
        elif isinstance(dv := volume.get("dataVolume"), dict):
            if dv.get("name") in renamed:
                dv["name"] = renamed[dv["name"]]
        elif isinstance(cm := volume.get("configMap"), dict):
            if config_maps and cm.get("name"):
                cm["name"] += suffix
        elif isinstance(secret := volume.get("secret"), dict):
            if secrets and secret.get("secretName"):
                secret["secretName"] += suffix
        else:
            for source in ("cloudInitNoCloud", "cloudInitConfigDrive"):
                cloud_init = volume.get(source)
                if not secrets or not isinstance(cloud_init, dict):
                    continue
                for ref in ("userDataSecretRef", "networkDataSecretRef"):
                    if isinstance(named := cloud_init.get(ref), dict) and named.get("name"):
                        named["name"] += suffix
    return spec


class SortPolicy(enum.StrEnum):
    """Which VMs go first (scale-in, proactive update); upstream's default is Random."""

    ASCENDING = "AscendingOrder"
    DESCENDING = "DescendingOrder"
    NEWEST = "Newest"
    OLDEST = "Oldest"
    RANDOM = "Random"


def _created(vm: RawObject) -> dt.datetime:
    text = str(meta(vm).get("creationTimestamp") or "")
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return dt.datetime.min.replace(tzinfo=dt.UTC)


def sort_by_policy(
    vms: Sequence[RawObject], selection: Mapping[str, Any], rng: random.Random
) -> list[RawObject]:
    """`vms` in the order a selectionPolicy's sortPolicy picks them (unknown: Random)."""
    out = list(vms)
    try:
        policy = SortPolicy(selection.get("sortPolicy") or SortPolicy.RANDOM)
    except ValueError:
        policy = SortPolicy.RANDOM
    if policy in (SortPolicy.ASCENDING, SortPolicy.DESCENDING):
        out.sort(
            key=lambda v: name_index(str(meta(v).get("name"))) or 0,
            reverse=policy is SortPolicy.DESCENDING,
        )
    elif policy in (SortPolicy.NEWEST, SortPolicy.OLDEST):
        out.sort(key=_created, reverse=policy is SortPolicy.NEWEST)
    else:
        rng.shuffle(out)
    return out


def select_by(vms: Sequence[RawObject], selectors: Mapping[str, Any]) -> list[RawObject]:
    """The VMs a selectionPolicy's selectors pick: labelSelector on the VM template's labels,
    nodeSelectorRequirementMatcher on its nodeSelector (raises SelectorError when invalid)."""
    label_selector = selectors.get("labelSelector")
    node_matcher = selectors.get("nodeSelectorRequirementMatcher")
    if label_selector is None and node_matcher is None:
        return list(vms)
    node_selector = {"matchExpressions": list(node_matcher or ())}
    picked = []
    for vm in vms:
        template = mapping(mapping(vm.get("spec")).get("template"))
        if label_selector is not None and not matches(
            mapping(label_selector),
            mapping(mapping(template.get("metadata")).get("labels")),
            empty_matches_all=True,
        ):
            continue
        if node_matcher is not None and not (
            node_selector["matchExpressions"]
            and matches(node_selector, mapping(mapping(template.get("spec")).get("nodeSelector")))
        ):
            continue
        picked.append(vm)
    return picked


def max_unavailable(pool_spec: Mapping[str, Any]) -> int:
    """maxUnavailable as a count (default 100% of replicas), at least 1, as upstream."""
    raw = pool_spec.get("maxUnavailable", "100%")
    replicas = pool_spec.get("replicas")
    total = replicas if isinstance(replicas, int) else 1
    if isinstance(raw, str):
        text = raw.removesuffix("%")
        if not text.isdigit():
            raise ValueError(f"spec.maxUnavailable: invalid percentage {raw!r}")
        count = total * int(text) // 100
    else:
        count = int(raw)
    return max(count, 1)


def vm_outdated(
    pool_spec: Mapping[str, Any], vm: RawObject, revision: Mapping[str, Any] | None
) -> bool:
    """Whether the VM was made from another template than the pool's (or we cannot tell)."""
    if REVISION_LABEL not in labels(vm) or revision is None:
        return True
    return bool(
        thaw(revision.get("virtualMachineTemplate"))
        != thaw(pool_spec.get("virtualMachineTemplate"))
    )


class UpdateKind(enum.Enum):
    """What a VMI needs once its VM moved to a newer revision."""

    NONE = "no-update"
    RESTART = "restart"  # delete the VMI; the VM starts it again from the new template
    LABEL = "label-patch"  # same VMI template: only the revision label moves
    DELETE_VM = "vm-delete"  # dataVolumeTemplates changed: the VM is made again


def vmi_update(
    vm: RawObject,
    vmi: RawObject,
    revision_of: Callable[[str], Mapping[str, Any] | None],
) -> UpdateKind:
    """Upstream's isOutdatedVMI: compare the pool revisions the VM and the VMI come from."""
    vm_revision = labels(vm).get(REVISION_LABEL)
    if vm_revision is None:
        return UpdateKind.NONE  # the VM gets its label first
    vmi_revision = labels(vmi).get(REVISION_LABEL)
    if vmi_revision is None:
        return UpdateKind.RESTART
    if vm_revision == vmi_revision:
        return UpdateKind.NONE
    wanted = revision_of(vm_revision)
    if wanted is None:
        return UpdateKind.NONE  # made on a later pass
    current = revision_of(vmi_revision)
    if current is None:
        return UpdateKind.RESTART
    wanted_vm = mapping(mapping(wanted.get("virtualMachineTemplate")).get("spec"))
    current_vm = mapping(mapping(current.get("virtualMachineTemplate")).get("spec"))
    if thaw(wanted_vm.get("dataVolumeTemplates")) != thaw(current_vm.get("dataVolumeTemplates")):
        return UpdateKind.DELETE_VM
    if thaw(wanted_vm.get("template")) != thaw(current_vm.get("template")):
        return UpdateKind.RESTART
    return UpdateKind.LABEL


# Upstream's autohealing: printable statuses that count as failing to start (once the VM
# has not been Ready for minFailingToStartDuration), and its defaults.
FAILING_STATUSES = frozenset(
    {
        Printable.CRASH_LOOP_BACK_OFF,
        Printable.ERROR_UNSCHEDULABLE,
        Printable.DATA_VOLUME_ERROR,
        Printable.ERROR_PVC_NOT_FOUND,
        Printable.ERR_IMAGE_PULL,
        Printable.IMAGE_PULL_BACK_OFF,
    }
)
START_FAILURE_THRESHOLD = 3
MIN_FAILING_TO_START = dt.timedelta(minutes=5)

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(text: str) -> dt.timedelta:
    """A metav1.Duration (Go's time.Duration text, e.g. `5m0s`, `1h30m`, `90s`)."""
    if text in ("0", ""):
        return dt.timedelta(0)
    position, seconds = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        seconds += float(match[1]) * _UNIT_SECONDS[match[2]]
        position = match.end()
    if position != len(text):
        raise ValueError(f"invalid duration {text!r}; e.g. 5m0s, 90s, 1h")
    return dt.timedelta(seconds=seconds)


def _parse_time(text: object) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def heal_after(vm: RawObject, autohealing: Mapping[str, Any], now: dt.datetime) -> float | None:
    """Seconds until autohealing replaces `vm`: 0 when due now (startFailure at the
    threshold, or a failing status for minFailingToStartDuration), None when it is healthy."""
    status = mapping(vm.get("status"))
    threshold = autohealing.get("startUpFailureThreshold") or START_FAILURE_THRESHOLD
    failures = mapping(status.get("startFailure")).get("consecutiveFailCount")
    if isinstance(failures, int) and failures >= threshold:
        return 0.0
    if status.get("printableStatus") not in FAILING_STATUSES:
        return None
    ready = condition(vm, "Ready")
    if ready is None or ready.get("status") != "False":
        return None
    # Upstream reads lastProbeTime; our VM controller leaves it null, so the transition counts.
    since = _parse_time(ready.get("lastProbeTime")) or _parse_time(ready.get("lastTransitionTime"))
    if since is None:
        return None
    raw = autohealing.get("minFailingToStartDuration")
    wait = go_duration(raw) if isinstance(raw, str) else MIN_FAILING_TO_START
    return max((since + wait - now).total_seconds(), 0.0)


def kept_volumes(vm: RawObject) -> tuple[list[str], list[str]]:
    """The PVCs and DataVolumes a VM's state lives in (statePreservation keeps them):
    its dataVolumeTemplates plus the claims and DataVolumes its volumes name."""
    spec = mapping(vm.get("spec"))
    templates = [
        str(mapping(t.get("metadata")).get("name"))
        for t in spec.get("dataVolumeTemplates") or ()
        if mapping(t.get("metadata")).get("name")
    ]
    claims, volumes = list(templates), list(templates)
    for volume in mapping(mapping(spec.get("template")).get("spec")).get("volumes") or ():
        if name := mapping(volume.get("persistentVolumeClaim")).get("claimName"):
            claims.append(str(name))
        if name := mapping(volume.get("dataVolume")).get("name"):
            volumes.append(str(name))
    return sorted(set(claims)), sorted(set(volumes))
