"""A VMI's status from what its launcher reports: phase, conditions, node, launcher, guest.

Pure: the current VMI (raw JSON) and the observed domain in, the status fields to
change out (an empty dict when nothing changes). virt-handler owns only the fields it
writes here; conditions of other types are carried over untouched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from kube_runtime import thaw
from kubevirt_api.conditions import same_condition, vmi_ready_condition
from kubevirt_api.enums import FINAL_VMI_PHASES
from kubevirt_api.enums import VirtualMachineInstancePhase as Phase
from virt_domain.podnetwork import PodNetwork
from virt_rpc import DomainReason, DomainState

from .migratability import (
    ALLOW_POD_BRIDGE_MIGRATION,
    INTERFACE_NOT_MIGRATABLE,
    Migratability,
    interface_not_migratable,
    migratability,
)
from .migration_state import MigrationView
from .netplan import POD_IFACE

__all__ = [
    "ACCESS_CREDENTIALS_SYNCHRONIZED",
    "ALLOW_POD_BRIDGE_MIGRATION",
    "DOMAIN_FAILED",
    "INTERFACE_NOT_MIGRATABLE",
    "LAUNCHER_FAILED",
    "POD_STOPPED",
    "AccessCredentialsView",
    "DomainView",
    "GuestNicView",
    "GuestOsView",
    "MemoryDumpView",
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
# status.reason of a VMI that failed: its launcher went away, its domain crashed or
# failed, or its pod was stopped by someone other than the VMI's owner.
LAUNCHER_FAILED = "LauncherFailed"
DOMAIN_FAILED = "DomainFailed"
POD_STOPPED = "PodStopped"
AGENT_CONNECTED = "AgentConnected"
AGENT_UNSUPPORTED = "AgentVersionNotSupported"
ACCESS_CREDENTIALS_SYNCHRONIZED = "AccessCredentialsSynchronized"


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
class GuestNicView:
    """One interface as the guest agent sees it (name in the guest, MAC, addresses)."""

    name: str
    mac: str = ""
    ip_addresses: tuple[str, ...] = ()


@dataclass(frozen=True)
class AccessCredentialsView:
    """The launcher's last propagation of agent-propagated access credentials."""

    succeeded: bool
    message: str = ""


@dataclass(frozen=True)
class MemoryDumpView:
    """The launcher's record of the last memory dump it started (upstream's metadata)."""

    file_name: str
    start_timestamp: str = ""
    end_timestamp: str = ""
    completed: bool = False
    failed: bool = False
    failure_reason: str = ""


@dataclass(frozen=True)
class DomainView:
    """The launcher's last word about its domain."""

    state: DomainState
    reason: DomainReason = DomainReason.UNSPECIFIED
    interfaces: tuple[tuple[str, str], ...] = ()  # (VMI interface name, MAC)
    disks: tuple[tuple[str, str], ...] = ()  # (VMI disk name, guest device)
    #: The launcher's record of the live migration this domain takes part in, if any.
    migration: MigrationView | None = None
    #: The last memory dump the launcher started, if any.
    memory_dump: MemoryDumpView | None = None
    #: The launcher shut the guest down because its pod was being stopped.
    pod_stopping: bool = False


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
    #: Why the connected agent is not supported (upstream's reason); "" when it is.
    agent_unsupported: str = ""
    #: guest-fsfreeze-status ("frozen", "thawed"); "" while unknown.
    fsfreeze_status: str = ""
    #: The guest agent's interfaces (merged into status.interfaces by MAC).
    guest_nics: Sequence[GuestNicView] = ()
    #: The VMI's launcher pod on this node (raw), None when there is none: the VMI's
    #: Ready condition mirrors its Ready condition (the rule virt-controller applies too).
    pod: Mapping[str, Any] | None = None
    #: volumeStatus with the hotplug phases the handler writes (hotplug.py); None: unchanged.
    volume_status: Sequence[Mapping[str, Any]] | None = None
    #: None: the launcher reported no agent-propagated credentials (the condition stays).
    access_credentials: AccessCredentialsView | None = None


class _StatusBody(TypedDict, total=False):
    """The VMI status fields read here (the CRD's schema holds them to these types)."""

    phase: str
    phaseTransitionTimestamps: list[Mapping[str, Any]]
    nodeName: str
    conditions: list[Mapping[str, Any]]
    launcherContainerImageVersion: str
    guestOSInfo: Mapping[str, Any]
    interfaces: list[Mapping[str, Any]]
    fsFreezeStatus: str
    migrationMethod: str


def _next_phase(current: str, obs: Observation) -> tuple[str, str]:
    """(phase, status.reason: empty unless it failed) after this observation."""
    if current in FINAL_VMI_PHASES:
        return current, ""
    domain = obs.domain
    if domain is None:
        if current == Phase.RUNNING and obs.launcher_gone:
            return Phase.FAILED, LAUNCHER_FAILED
        return current, ""
    if domain.state in _ALIVE:
        return (Phase.RUNNING, "") if current in _STARTABLE else (current, "")
    # Shut off or crashed: only a guest that ran can finish.
    if current != Phase.RUNNING:
        if obs.launcher_gone:
            return Phase.FAILED, LAUNCHER_FAILED
        return current, ""
    if domain.reason is DomainReason.MIGRATED:
        return current, ""  # the guest runs on the target now: its handler decides
    if domain.state is DomainState.CRASHED or domain.reason in _FAILURE_REASONS:
        return Phase.FAILED, DOMAIN_FAILED
    if domain.pod_stopping:
        # The pod was stopped while the VMI was not being deleted (a deleted VMI's status
        # is not written): an eviction, a kubelet that rejected the pod on restart, a
        # `kubectl delete pod`. Upstream calls this Succeeded, so RerunOnFailure leaves
        # the VM down (kubevirt/kubevirt#9823); its owner did not stop it: it failed.
        return Phase.FAILED, POD_STOPPED
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


def _conditions(
    existing: Sequence[Mapping[str, Any]],
    phase: str,
    obs: Observation,
    migratable: Migratability | None = None,
) -> list[dict[str, Any]]:
    by_type = {str(c.get("type")): dict(c) for c in existing}
    # libvirt pauses a migrating guest for its last copy: not the user's pause.
    paused = (
        obs.domain is not None
        and obs.domain.state is DomainState.PAUSED
        and obs.domain.reason is not DomainReason.MIGRATED
    )
    wanted: dict[str, dict[str, Any] | None] = {}
    wanted["Paused"] = (
        _condition("Paused", True, obs.now, "PausedByUser", "VMI was paused by user")
        if paused and phase == Phase.RUNNING
        else None
    )
    # upstream's updateGuestAgentConditions: present while the channel is connected.
    agent = obs.agent_connected and phase == Phase.RUNNING
    wanted[AGENT_CONNECTED] = _condition(AGENT_CONNECTED, True, obs.now) if agent else None
    wanted[AGENT_UNSUPPORTED] = (
        _condition(AGENT_UNSUPPORTED, True, obs.now, obs.agent_unsupported)
        if agent and obs.agent_unsupported
        else None
    )
    # upstream's updateAccessCredentialConditions: status and message, no reason; set
    # only while the launcher reports one.
    if obs.access_credentials is not None:
        wanted[ACCESS_CREDENTIALS_SYNCHRONIZED] = _condition(
            ACCESS_CREDENTIALS_SYNCHRONIZED,
            obs.access_credentials.succeeded,
            obs.now,
            message=obs.access_credentials.message,
        )
    # LiveMigratable: a refusal as soon as it is known, the consent once the guest runs.
    if migratable is not None and phase not in FINAL_VMI_PHASES:
        if migratable.reason or phase == Phase.RUNNING:
            wanted["LiveMigratable"] = _condition(
                "LiveMigratable",
                not migratable.reason,
                obs.now,
                migratable.reason,
                migratable.message,
            )
        elif by_type.get("LiveMigratable", {}).get("status") == "False":
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
        same = all(
            (new.get(k) or "") == (cond.get(k) or "") for k in ("status", "reason", "message")
        )
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
            patch["reason"] = failure
    if obs.node and status.get("nodeName") != obs.node and phase not in FINAL_VMI_PHASES:
        patch["nodeName"] = obs.node
    existing = list(status.get("conditions") or ())
    migratable = migratability(vmi)
    conditions = _conditions(existing, phase, obs, migratable)
    if phase == Phase.RUNNING and status.get("migrationMethod") != migratable.method:
        patch["migrationMethod"] = migratable.method
    if obs.guest_os is not None:
        info = obs.guest_os.as_status()
        if info and status.get("guestOSInfo") != info:
            patch["guestOSInfo"] = info
    if obs.domain is not None and obs.domain.interfaces and phase == Phase.RUNNING:
        interfaces = _interfaces(
            status.get("interfaces"), obs.domain.interfaces, obs.networks, obs.guest_nics
        )
        if interfaces is not None:
            patch["interfaces"] = interfaces
    # upstream's updateFSFreezeStatus: "frozen" shows, "thawed" clears the field.
    if obs.fsfreeze_status and phase == Phase.RUNNING:
        frozen = obs.fsfreeze_status if obs.fsfreeze_status != "thawed" else None
        if status.get("fsFreezeStatus") != frozen:
            patch["fsFreezeStatus"] = frozen
    if obs.volume_status is not None:
        patch["volumeStatus"] = [dict(v) for v in obs.volume_status]
    if patch or conditions != [dict(c) for c in existing]:
        conditions = _with_ready(conditions, phase, obs)
    if conditions != [dict(c) for c in existing]:
        patch["conditions"] = conditions
    # The launcher's image rides along with a write made anyway (before Running there is
    # always one to come: the phase), never a write of its own.
    stale = obs.launcher_image and status.get("launcherContainerImageVersion") != obs.launcher_image
    if stale and (patch or phase == Phase.RUNNING):
        patch["launcherContainerImageVersion"] = obs.launcher_image
    return patch


def _with_ready(
    conditions: list[dict[str, Any]], phase: str, obs: Observation
) -> list[dict[str, Any]]:
    """Ready by virt-controller's rule, riding along in a write made anyway: the phase
    written here carries the Ready the controller would write next, so it writes nothing
    for it; alone (the pod's readiness changed), Ready is the controller's to write."""
    if phase != Phase.RUNNING and phase not in FINAL_VMI_PHASES:
        return conditions  # the controller's phases: its pod is the one that counts
    ready = vmi_ready_condition(phase == Phase.RUNNING, obs.pod, obs.now)
    current = next((c for c in conditions if c.get("type") == "Ready"), None)
    if same_condition(current, ready):
        return conditions
    if current is None:
        return [ready, *conditions]
    return [ready if c is current else c for c in conditions]


def _interfaces(
    existing: object,
    seen: tuple[tuple[str, str], ...],
    networks: Sequence[PodNetwork] | None,
    guest_nics: Sequence[GuestNicView] = (),
) -> list[dict[str, Any]] | None:
    """status.interfaces as upstream's `NetStat.UpdateStatus`; None when unchanged.

    One entry per domain NIC (name, MAC, infoSource `domain`); a pod-network NIC also gets
    the pod's IPs (masquerade and bridge alike: what a client dials) and its pod interface,
    and goes first. `networks` None: not known yet (a restarted handler), keep the IPs.
    A guest agent interface with the same MAC adds its name in the guest (infoSource
    `domain, guest-agent`) and, off the pod network, its addresses; one the domain does
    not have (loopback aside) is listed with infoSource `guest-agent`.
    """
    # Thawed: the informer's copy holds tuples where the wanted entries hold lists, and a
    # tuple never equals a list (every resync would write the same interfaces again).
    current = (
        [thaw(i) for i in existing or () if isinstance(i, Mapping)]
        if isinstance(existing, (list, tuple))
        else []
    )
    by_name = {str(i.get("name")): i for i in current}
    on_pod = {n.interface: n for n in networks or ()}
    in_guest = {nic.mac.lower(): nic for nic in guest_nics if nic.mac}
    wanted: list[dict[str, Any]] = []
    for name, mac in seen:
        entry = dict(by_name.get(name, {"name": name}))
        if mac:
            entry["mac"] = mac
        guest = in_guest.pop(mac.lower(), None) if mac else None
        entry["infoSource"] = "domain, guest-agent" if guest is not None else "domain"
        if guest is not None:
            entry["interfaceName"] = guest.name
            if name not in on_pod and guest.ip_addresses:
                entry["ipAddress"] = guest.ip_addresses[0]
                entry["ipAddresses"] = list(guest.ip_addresses)
        else:
            entry.pop("interfaceName", None)
        network = on_pod.get(name)
        if network is not None:
            entry["podInterfaceName"] = POD_IFACE
            if network.pod_ips:
                entry["ipAddress"] = network.pod_ips[0]
                entry["ipAddresses"] = list(network.pod_ips)
        elif networks is not None and guest is None:
            for key in ("ipAddress", "ipAddresses", "podInterfaceName"):
                entry.pop(key, None)
        wanted.append(entry)
    for nic in in_guest.values():
        if nic.name != "lo":
            only: dict[str, Any] = {"interfaceName": nic.name, "mac": nic.mac}
            if nic.ip_addresses:
                only["ipAddress"] = nic.ip_addresses[0]
                only["ipAddresses"] = list(nic.ip_addresses)
            only["infoSource"] = "guest-agent"
            wanted.append(only)
    wanted.sort(key=lambda e: 0 if "podInterfaceName" in e else 1)  # the primary first
    return wanted if wanted != current else None
