"""A VMI's status from what its launcher reports: phase, conditions, node, launcher, guest.

Pure: the current VMI (raw JSON) and the observed domain in, the status fields to
change out (an empty dict when nothing changes). virt-handler owns only the fields it
writes here; conditions of other types are carried over untouched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from kubevirt_api.enums import FINAL_VMI_PHASES
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase
from virt_domain.podnetwork import PodNetwork
from virt_rpc import DomainReason, DomainState

from .netplan import POD_IFACE

__all__ = [
    "ALLOW_POD_BRIDGE_MIGRATION",
    "INTERFACE_NOT_MIGRATABLE",
    "DomainView",
    "GuestOsView",
    "Observation",
    "compute_status",
    "interface_not_migratable",
]

# Phases from which a running domain makes the VMI Running.
_STARTABLE = frozenset({Phase.SCHEDULED, Phase.RUNNING})
_ALIVE = frozenset(
    {
        DomainState.RUNNING,
        DomainState.BLOCKED,
        DomainState.PAUSED,
        DomainState.SHUTTING_DOWN,
        DomainState.PMSUSPENDED,
    }
)
# A stopped domain with one of these reasons did not end by the guest's or user's will.
_FAILURE_REASONS = frozenset(
    {DomainReason.CRASHED, DomainReason.FAILED, DomainReason.PANICKED, DomainReason.NON_EXISTENT}
)
_OWNED_CONDITIONS = ("Ready", "Paused")


@dataclass(frozen=True)
class GuestOsView:
    """What the guest agent said about the OS (upstream's status.guestOSInfo fields)."""

    name: str = ""
    id: str = ""
    pretty_name: str = ""
    version: str = ""
    version_id: str = ""
    kernel_release: str = ""
    kernel_version: str = ""
    machine: str = ""

    def as_status(self) -> dict[str, str]:
        """status.guestOSInfo, empty values dropped."""
        names = {
            "name": self.name,
            "id": self.id,
            "prettyName": self.pretty_name,
            "version": self.version,
            "versionId": self.version_id,
            "kernelRelease": self.kernel_release,
            "kernelVersion": self.kernel_version,
            "machine": self.machine,
        }
        return {k: v for k, v in names.items() if v}


@dataclass(frozen=True)
class DomainView:
    """The launcher's last word about its domain."""

    state: DomainState
    reason: DomainReason = DomainReason.UNSPECIFIED
    interfaces: tuple[tuple[str, str], ...] = ()  # (VMI interface name, MAC)


@dataclass(frozen=True)
class Observation:
    """Everything the handler knows about one VMI's guest right now."""

    node: str
    #: None: the launcher has not reported a domain yet (or it was never defined).
    domain: DomainView | None = None
    #: The launcher was reachable once and is gone now (pod, process or socket).
    launcher_gone: bool = False
    launcher_image: str = ""
    guest_os: GuestOsView | None = None
    agent_connected: bool = False
    now: str = ""
    reasons: Sequence[str] = field(default_factory=tuple)
    #: What phase 1 made of the pod network; None: not known (yet) since a restart.
    networks: Sequence[PodNetwork] | None = None


class _StatusBody(TypedDict, total=False):
    """The VMI status fields read here (the CRD's schema holds them to these types)."""

    phase: str
    phaseTransitionTimestamps: list[Mapping[str, Any]]
    nodeName: str
    conditions: list[Mapping[str, Any]]
    launcherContainerImageVersion: str
    guestOSInfo: Mapping[str, Any]
    interfaces: list[Mapping[str, Any]]


def _next_phase(current: str, obs: Observation) -> tuple[str, str]:
    """(phase, reason for a failure) after this observation."""
    if current in FINAL_VMI_PHASES:
        return current, ""
    domain = obs.domain
    if domain is None:
        if current == Phase.RUNNING and obs.launcher_gone:
            return Phase.FAILED, "the launcher is gone"
        return current, ""
    if domain.state in _ALIVE:
        return (Phase.RUNNING, "") if current in _STARTABLE else (current, "")
    # Shut off or crashed: only a guest that ran can finish.
    if current != Phase.RUNNING:
        if obs.launcher_gone:
            return Phase.FAILED, "the launcher is gone"
        return current, ""
    if domain.state is DomainState.CRASHED or domain.reason in _FAILURE_REASONS:
        return Phase.FAILED, f"the domain stopped: {domain.reason.name.lower()}"
    return Phase.SUCCEEDED, ""


def _condition(
    kind: str, status: bool, now: str, reason: str = "", message: str = ""
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": kind,
        "status": "True" if status else "False",
        "lastProbeTime": None,
        "lastTransitionTime": now or None,
    }
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


ALLOW_POD_BRIDGE_MIGRATION = "kubevirt.io/allow-pod-bridge-network-live-migration"
INTERFACE_NOT_MIGRATABLE = "InterfaceNotLiveMigratable"


def interface_not_migratable(vmi: Mapping[str, Any]) -> str:
    """Upstream's `checkNetworkInterfacesForMigration` for the pod network: why the
    VMI's primary interface cannot live-migrate ("" when it can). Bridge binding on the
    pod network cannot, unless the VMI carries ALLOW_POD_BRIDGE_MIGRATION."""
    spec = vmi.get("spec") or {}
    pod_network = next((n for n in spec.get("networks") or () if "pod" in n), None)
    interfaces = (spec.get("domain") or {}).get("devices", {}).get("interfaces") or ()
    if pod_network is None or not interfaces:
        return ""
    primary = next((i for i in interfaces if i.get("name") == pod_network.get("name")), None)
    if primary is None:
        return f"no primary interface found for network {pod_network.get('name')}"
    if "masquerade" in primary or "passtBinding" in primary:
        return ""
    annotations = (vmi.get("metadata") or {}).get("annotations") or {}
    if "bridge" in primary and ALLOW_POD_BRIDGE_MIGRATION in annotations:
        return ""
    return (
        "cannot migrate VMI which does not use masquerade or a migratable plugin to connect "
        "to the pod network"
    )


def _conditions(
    existing: Sequence[Mapping[str, Any]], phase: str, obs: Observation, not_migratable: str = ""
) -> list[dict[str, Any]]:
    by_type = {str(c.get("type")): dict(c) for c in existing}
    paused = obs.domain is not None and obs.domain.state is DomainState.PAUSED
    wanted: dict[str, dict[str, Any] | None] = {}
    if phase == Phase.RUNNING:
        wanted["Ready"] = _condition("Ready", not paused, obs.now)
    elif phase in FINAL_VMI_PHASES:
        wanted["Ready"] = _condition("Ready", False, obs.now, "GuestNotRunning")
    else:
        wanted["Ready"] = by_type.get("Ready")  # not ours to judge yet
    wanted["Paused"] = (
        _condition("Paused", True, obs.now, "PausedByUser", "VMI was paused by user")
        if paused and phase == Phase.RUNNING
        else None
    )
    if obs.agent_connected and phase == Phase.RUNNING:
        wanted["AgentConnected"] = _condition("AgentConnected", True, obs.now)
    # LiveMigratable: only the interface reason is judged here (the volume, CPU and
    # device checks are not built yet), so the condition is ours only when we set it.
    if not_migratable and phase not in FINAL_VMI_PHASES:
        wanted["LiveMigratable"] = _condition(
            "LiveMigratable", False, obs.now, INTERFACE_NOT_MIGRATABLE, not_migratable
        )
    elif by_type.get("LiveMigratable", {}).get("reason") == INTERFACE_NOT_MIGRATABLE:
        wanted["LiveMigratable"] = None
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for cond in existing:
        kind = str(cond.get("type"))
        seen.add(kind)
        if kind not in wanted:
            out.append(dict(cond))
            continue
        new = wanted[kind]
        if new is None:
            continue
        same = new.get("status") == cond.get("status") and new.get("reason") == cond.get("reason")
        out.append(dict(cond) if same else new)
    for kind, new in wanted.items():
        if kind not in seen and new is not None:
            out.append(new)
    return out


def compute_status(vmi: Mapping[str, Any], obs: Observation) -> dict[str, Any]:
    """The status fields to patch (merge-patch shape); {} when the VMI is up to date."""
    status: _StatusBody = vmi.get("status") or _StatusBody()
    current = status.get("phase") or ""
    phase, failure = _next_phase(current, obs)
    patch: dict[str, Any] = {}
    if phase != current:
        patch["phase"] = phase
        stamps = [dict(s) for s in status.get("phaseTransitionTimestamps") or ()]
        stamps.append({"phase": phase, "phaseTransitionTimestamp": obs.now or None})
        patch["phaseTransitionTimestamps"] = stamps
        if failure:
            patch["reason"] = "LauncherFailed" if "launcher" in failure else "DomainFailed"
    if obs.node and status.get("nodeName") != obs.node and phase not in FINAL_VMI_PHASES:
        patch["nodeName"] = obs.node
    existing = list(status.get("conditions") or ())
    conditions = _conditions(existing, phase, obs, interface_not_migratable(vmi))
    if conditions != [dict(c) for c in existing]:
        patch["conditions"] = conditions
    if obs.launcher_image and status.get("launcherContainerImageVersion") != obs.launcher_image:
        patch["launcherContainerImageVersion"] = obs.launcher_image
    if obs.guest_os is not None:
        info = obs.guest_os.as_status()
        if info and status.get("guestOSInfo") != info:
            patch["guestOSInfo"] = info
    if obs.domain is not None and obs.domain.interfaces and phase == Phase.RUNNING:
        interfaces = _interfaces(status.get("interfaces"), obs.domain.interfaces, obs.networks)
        if interfaces is not None:
            patch["interfaces"] = interfaces
    return patch


def _interfaces(
    existing: object, seen: tuple[tuple[str, str], ...], networks: Sequence[PodNetwork] | None
) -> list[dict[str, Any]] | None:
    """status.interfaces as upstream's `NetStat.UpdateStatus`; None when unchanged.

    One entry per domain NIC (name, MAC, infoSource `domain`); a pod-network NIC also gets
    the pod's IPs (masquerade and bridge alike: what a client dials) and its pod interface,
    and goes first. `networks` None: not known yet (a restarted handler), keep the IPs.
    """
    current = (
        [dict(i) for i in existing or () if isinstance(i, Mapping)]
        if isinstance(existing, (list, tuple))
        else []
    )
    by_name = {str(i.get("name")): i for i in current}
    on_pod = {n.interface: n for n in networks or ()}
    wanted: list[dict[str, Any]] = []
    for name, mac in seen:
        entry = dict(by_name.get(name, {"name": name}))
        if mac:
            entry["mac"] = mac
        entry.setdefault("infoSource", "domain")
        network = on_pod.get(name)
        if network is not None:
            entry["podInterfaceName"] = POD_IFACE
            if network.pod_ips:
                entry["ipAddress"] = network.pod_ips[0]
                entry["ipAddresses"] = list(network.pod_ips)
        elif networks is not None:
            for key in ("ipAddress", "ipAddresses", "podInterfaceName"):
                entry.pop(key, None)
        wanted.append(entry)
    wanted.sort(key=lambda e: 0 if "podInterfaceName" in e else 1)  # the primary first
    return wanted if wanted != current else None
