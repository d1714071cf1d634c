"""VirtualMachineExport decisions without I/O: what the source offers, the objects the
exporter needs (token Secret, Service, pod), and the status that follows.

As upstream (pkg/storage/export/export): a PVC source is available once bound and used by
no pod but the exporter; a VM source once stopped (no VMI, or one that has ended), its PVC
volumes being exported; a VM with no PVC volumes is Skipped (VMNoVolumes).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kube_runtime import RawObject
from kubevirt_api import exports as ex
from kubevirt_api.durations import DurationError, parse_duration

from .objects import deleting, mapping, meta, owner_ref, parse_time, phase, upsert_condition

__all__ = [
    "EXPORT_API_VERSION",
    "EXPORT_KIND",
    "PVC_READY",
    "READY",
    "Source",
    "SourceRef",
    "cert_secret",
    "expiration",
    "export_status",
    "exporter_pod",
    "exporter_service",
    "pvc_source",
    "source_ref",
    "token_secret",
    "unsupported_source",
    "vm_claims",
    "vm_source",
]

EXPORT_API_VERSION = "export.kubevirt.io/v1"
EXPORT_KIND = "VirtualMachineExport"
READY = "Ready"
PVC_READY = "PVCReady"

# Phases and reasons (upstream's constants).
PENDING, PHASE_READY, SKIPPED, TERMINATED = "Pending", "Ready", "Skipped", "Terminated"
INITIALIZING, UNKNOWN, IN_USE = "Initializing", "Unknown", "InUse"
POD_READY, POD_PENDING, POD_COMPLETED = "PodReady", "PodPending", "PodCompleted"
PVC_NOT_FOUND, PVC_BOUND, PVC_PENDING = "PVCNotFound", "PVCBound", "PVCPending"
VM_NOT_FOUND, VM_NO_VOLUMES = "VMNotFound", "VMNoVolumes"
#: Ours: a source kind this controller does not export (VirtualMachineSnapshot, for now).
UNSUPPORTED_SOURCE = "UnsupportedSource"

KUBEVIRT_GROUP = "kubevirt.io"


@dataclass(frozen=True, slots=True)
class SourceRef:
    """spec.source, read defensively."""

    api_group: str
    kind: str
    name: str

    @property
    def is_pvc(self) -> bool:
        return self.kind == "PersistentVolumeClaim" and self.api_group == ""

    @property
    def is_vm(self) -> bool:
        return self.kind == "VirtualMachine" and self.api_group == KUBEVIRT_GROUP


def source_ref(export: RawObject) -> SourceRef:
    """spec.source (apiGroup absent means the core group, as upstream)."""
    source = mapping(mapping(export.get("spec")).get("source"))
    return SourceRef(
        str(source.get("apiGroup") or ""),
        str(source.get("kind") or ""),
        str(source.get("name") or ""),
    )


@dataclass(frozen=True, slots=True)
class Condition:
    status: str
    reason: str
    message: str = ""


@dataclass(frozen=True, slots=True)
class Source:
    """What a source offers for export right now."""

    #: The claims to export (raw PVCs), in the source's order.
    claims: tuple[RawObject, ...] = ()
    #: Whether the exporter may run (found, bound or populated, not in use).
    available: bool = False
    ready: Condition = field(default_factory=lambda: Condition("False", INITIALIZING))
    #: PVCReady; None keeps whatever the status holds.
    pvc: Condition | None = None
    #: The VM has nothing to export: phase Skipped.
    skipped: bool = False
    vm_name: str | None = None


def _claim_condition(claims: Sequence[RawObject]) -> Condition:
    """PVCReady from the most severe claim phase (Lost > Pending > Bound), as upstream."""
    phases = {phase(c) for c in claims}
    if "Lost" in phases:
        return Condition("False", UNKNOWN)
    if "Pending" in phases or "" in phases:
        return Condition("False", PVC_PENDING)
    return Condition("True", PVC_BOUND)


def _bound(claim: RawObject) -> bool:
    return phase(claim) == "Bound"


def _uses_claim(pod: RawObject, claim: str) -> bool:
    for volume in mapping(pod.get("spec")).get("volumes") or ():
        if mapping(mapping(volume).get("persistentVolumeClaim")).get("claimName") == claim:
            return True
    return False


def _owned_by(obj: RawObject, owner_uid: str) -> bool:
    return any(
        mapping(ref).get("uid") == owner_uid for ref in meta(obj).get("ownerReferences") or ()
    )


def claim_users(pods: Iterable[RawObject], claim: str, export_uid: str) -> list[str]:
    """Names of live pods, other than this export's, that mount `claim`."""
    users = []
    for pod in pods:
        if phase(pod) in ("Succeeded", "Failed") or _owned_by(pod, export_uid):
            continue
        if _uses_claim(pod, claim):
            users.append(str(meta(pod).get("name")))
    return sorted(users)


def pvc_source(namespace: str, name: str, claim: RawObject | None, users: Sequence[str]) -> Source:
    """A PVC source: the claim (None: not found) and the pods that use it."""
    if claim is None:
        return Source(
            pvc=Condition(
                "False", PVC_NOT_FOUND, f"PersistentVolumeClaim {namespace}/{name} not found"
            )
        )
    pvc = _claim_condition([claim])
    if not _bound(claim):
        message = f"PersistentVolumeClaim {namespace}/{name} is not populated"
        return Source((claim,), False, Condition("False", PVC_PENDING, message), pvc)
    if users:
        message = f"PersistentVolumeClaim {namespace}/{name} is in use (pods {', '.join(users)})"
        return Source((claim,), False, Condition("False", IN_USE, message), pvc)
    return Source((claim,), True, Condition("False", INITIALIZING), pvc)


def vm_claims(vm: RawObject) -> list[str]:
    """The claim names of the VM's PVC and DataVolume volumes, in template order."""
    template = mapping(mapping(vm.get("spec")).get("template"))
    names: list[str] = []
    for volume in mapping(template.get("spec")).get("volumes") or ():
        volume = mapping(volume)
        claim = mapping(volume.get("persistentVolumeClaim")).get("claimName") or mapping(
            volume.get("dataVolume")
        ).get("name")
        if isinstance(claim, str) and claim and claim not in names:
            names.append(claim)
    return names


def vm_source(
    namespace: str,
    name: str,
    vm: RawObject | None,
    claims: Mapping[str, RawObject | None],
    vmi: RawObject | None,
) -> Source:
    """A VM source: the VM (None: not found), its claims by name, and its VMI if any."""
    if vm is None:
        message = f"Virtual Machine {namespace}/{name} not found"
        return Source(ready=Condition("False", VM_NOT_FOUND, message), vm_name=name)
    wanted = vm_claims(vm)
    if not wanted:
        message = f"Virtual Machine {namespace}/{name} has no volumes"
        return Source(ready=Condition("False", VM_NO_VOLUMES, message), skipped=True, vm_name=name)
    found = tuple(c for n in wanted if (c := claims.get(n)) is not None)
    pvc = _claim_condition(found) if found else Condition("False", PVC_NOT_FOUND)
    if len(found) < len(wanted) or not all(_bound(c) for c in found):
        message = f"Not all volumes in the Virtual Machine {namespace}/{name} are populated"
        return Source(
            found, False, Condition("False", "VolumesNotPopulated", message), pvc, vm_name=name
        )
    if vmi is not None and phase(vmi) not in ("Succeeded", "Failed"):
        message = f"Virtual Machine {namespace}/{name} is running"
        return Source(found, False, Condition("False", IN_USE, message), pvc, vm_name=name)
    return Source(found, True, Condition("False", INITIALIZING), pvc, vm_name=name)


def unsupported_source(ref: SourceRef) -> Source:
    """A source kind we do not export; the message says which ones we do."""
    group = ref.api_group or "core"
    message = (
        f"spec.source: {ref.kind or '(no kind)'} ({group}) cannot be exported here; "
        'supported: PersistentVolumeClaim (apiGroup "") and VirtualMachine (kubevirt.io)'
    )
    return Source(ready=Condition("False", UNSUPPORTED_SOURCE, message))


def ttl_seconds(export: RawObject) -> float:
    """spec.ttlDuration in seconds (2 h when unset); ValueError names the field."""
    text = mapping(export.get("spec")).get("ttlDuration")
    if text in (None, ""):
        return ex.DEFAULT_TTL_SECONDS
    try:
        seconds = parse_duration(str(text))
    except DurationError as exc:
        raise ValueError(f"spec.ttlDuration: {exc}") from None
    if seconds <= 0:
        raise ValueError(f"spec.ttlDuration: {text!r} must be positive")
    return seconds


def expiration(export: RawObject, ttl: float) -> dt.datetime | None:
    """creationTimestamp + ttl (None while the object has no creation time)."""
    created = parse_time(meta(export).get("creationTimestamp"))
    return None if created is None else created + dt.timedelta(seconds=ttl)


def _owner(export: RawObject) -> dict[str, Any]:
    return owner_ref(export, EXPORT_API_VERSION, EXPORT_KIND)


def token_secret(export: RawObject, name: str, token: str) -> dict[str, Any]:
    """The generated token Secret, owned by the export."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": meta(export).get("namespace"),
            "ownerReferences": [_owner(export)],
        },
        "type": "Opaque",
        "stringData": {ex.TOKEN_KEY: token},
    }


def cert_secret(export: RawObject, cert_pem: str, key_pem: str) -> dict[str, Any]:
    """The exporter's TLS Secret, owned by the export."""
    m = meta(export)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": ex.cert_secret_name(str(m.get("name"))),
            "namespace": m.get("namespace"),
            "ownerReferences": [_owner(export)],
        },
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": cert_pem, "tls.key": key_pem},
    }


def exporter_service(export: RawObject) -> dict[str, Any]:
    """`virt-export-<name>`: 443 -> the exporter pod's 8443."""
    m = meta(export)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": ex.exporter_name(str(m.get("name"))),
            "namespace": m.get("namespace"),
            "ownerReferences": [_owner(export)],
            "labels": {"kubevirt.io": ex.APP_VALUE},
        },
        "spec": {
            "ports": [
                {
                    "name": "export",
                    "protocol": "TCP",
                    "port": ex.SERVICE_PORT,
                    "targetPort": ex.SERVER_PORT,
                }
            ],
            "selector": {ex.SERVICE_LABEL: m.get("name")},
        },
    }


def _block(claim: RawObject) -> bool:
    return mapping(claim.get("spec")).get("volumeMode") == "Block"


def exporter_pod(
    export: RawObject,
    claims: Sequence[RawObject],
    *,
    image: str,
    pull_policy: str,
    token_secret_name: str,
    cert_pem: str,
    deadline: dt.datetime,
) -> dict[str, Any]:
    """The exporter pod: each claim read-only (Filesystem: mounted; Block: a device), the
    TLS Secret and the token Secret mounted, readiness over HTTPS, non-root (qemu's 107)."""
    m = meta(export)
    name = str(m.get("name"))
    files = ex.ServerFiles()
    env: list[dict[str, str]] = []
    mounts: list[dict[str, Any]] = []
    devices: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    for index, claim in enumerate(claims):
        claim_name = str(meta(claim).get("name"))
        block = _block(claim)
        described = ex.volume_env(index, claim_name, block=block)
        env += described.env()
        # By index: a claim may be named like the Secret volumes below (or be too long).
        volume = f"volume{index}"
        volumes.append(
            {"name": volume, "persistentVolumeClaim": {"claimName": claim_name, "readOnly": True}}
        )
        if block:
            devices.append({"name": volume, "devicePath": described.path})
        else:
            mounts.append({"name": volume, "mountPath": described.path, "readOnly": True})
    env += files.env()
    env.append({"name": "DEADLINE", "value": deadline.strftime("%Y-%m-%dT%H:%M:%SZ")})
    volumes += [
        {"name": "certificates", "secret": {"secretName": ex.cert_secret_name(name)}},
        {"name": "token", "secret": {"secretName": token_secret_name}},
    ]
    mounts += [
        {"name": "certificates", "mountPath": files.cert_file.rpartition("/")[0], "readOnly": True},
        {"name": "token", "mountPath": files.token_file.rpartition("/")[0], "readOnly": True},
    ]
    container: dict[str, Any] = {
        "name": "exportserver",
        "image": image,
        "imagePullPolicy": pull_policy,
        "env": env,
        "ports": [{"name": "export", "containerPort": ex.SERVER_PORT, "protocol": "TCP"}],
        "volumeMounts": mounts,
        "readinessProbe": {
            "httpGet": {"scheme": "HTTPS", "path": ex.READINESS_PATH, "port": ex.SERVER_PORT},
            "initialDelaySeconds": 1,
            "periodSeconds": 2,
        },
        "resources": {
            "requests": {"cpu": "10m", "memory": "64Mi"},
            "limits": {"memory": "256Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        },
    }
    if devices:
        container["volumeDevices"] = devices
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": ex.exporter_name(name),
            "namespace": m.get("namespace"),
            "labels": {"kubevirt.io": ex.APP_VALUE, ex.SERVICE_LABEL: name},
            "annotations": {ex.CERT_ANNOTATION: cert_pem},
            "ownerReferences": [_owner(export)],
        },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 107,
                "runAsGroup": 107,
                "fsGroup": 107,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [container],
            "volumes": volumes,
        },
    }


def _pod_ready(pod: RawObject) -> bool:
    if deleting(pod) or phase(pod) != "Running":
        return False
    for c in mapping(pod.get("status")).get("conditions") or ():
        if mapping(c).get("type") == "Ready":
            return mapping(c).get("status") == "True"
    return False


def _links(export: RawObject, claims: Sequence[RawObject], pod: RawObject) -> dict[str, Any]:
    m = meta(export)
    host = ex.internal_host(str(m.get("name")), str(m.get("namespace")))
    volumes = []
    for claim in claims:
        claim_name = str(meta(claim).get("name"))
        volumes.append(
            {
                "name": claim_name,
                "formats": [
                    {"format": ex.FORMAT_RAW, "url": ex.volume_url(host, claim_name, ex.RAW_FILE)},
                    {
                        "format": ex.FORMAT_GZIP,
                        "url": ex.volume_url(host, claim_name, ex.GZIP_FILE),
                    },
                ],
            }
        )
    cert = str(mapping(meta(pod).get("annotations")).get(ex.CERT_ANNOTATION) or "").strip()
    return {"internal": {"cert": cert, "volumes": volumes}}


def export_status(
    export: RawObject,
    source: Source,
    pod: RawObject | None,
    *,
    service_name: str,
    token_secret_ref: str | None,
    expires: dt.datetime | None,
    now: dt.datetime,
) -> dict[str, Any]:
    """The whole status we own, from the source and the exporter pod."""
    status = mapping(export.get("status"))
    conditions = list(status.get("conditions") or ())
    if not conditions:
        conditions = upsert_condition(conditions, READY, "False", now, reason=INITIALIZING)
        conditions = upsert_condition(conditions, PVC_READY, "False", now, reason=UNKNOWN)
    links: dict[str, Any] | None = None  # None removes stale links (a merge patch)
    if source.skipped:
        phase_, ready = SKIPPED, source.ready
    elif pod is None or not source.available:
        phase_ = PENDING
        ready = source.ready
    elif _pod_ready(pod):
        phase_, ready = PHASE_READY, Condition("True", POD_READY)
        links = _links(export, source.claims, pod)
    elif phase(pod) == "Succeeded":
        phase_, ready = TERMINATED, Condition("False", POD_COMPLETED)
    elif phase(pod) in ("", "Pending", "Running"):  # "": just created
        phase_, ready = PENDING, Condition("False", POD_PENDING)
    else:
        phase_, ready = PENDING, Condition("False", UNKNOWN)
    conditions = upsert_condition(
        conditions, READY, ready.status, now, reason=ready.reason, message=ready.message
    )
    if source.pvc is not None:
        pvc = source.pvc
        conditions = upsert_condition(
            conditions, PVC_READY, pvc.status, now, reason=pvc.reason, message=pvc.message
        )
    wanted: dict[str, Any] = {
        "phase": phase_,
        "conditions": conditions,
        "serviceName": service_name,
        "links": links,
    }
    if token_secret_ref is not None:
        wanted["tokenSecretRef"] = token_secret_ref
    if expires is not None:
        wanted["ttlExpirationTime"] = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
    if source.vm_name is not None:
        wanted["virtualMachineName"] = source.vm_name
    return wanted
