"""Renders the launcher pod of a VMI, as upstream's template service does.

Pure: a typed VMI and the cluster config in, a Pod body (plain JSON) out. Volumes, mount
paths, the launcher's uid and its command line come from the launcher-pod contract
(`virt_domain.launcher_pod`), which virt-launcher and virt-handler read too. How the
containerDisks and the kernelBoot image reach the pod (init-container copies, or image
volumes with the ImageVolume gate) is `image_delivery`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kubevirt_api import Quantity, VirtualMachineInstance, dump
from kubevirt_api.hotplug import is_hotplug_volume
from kubevirt_api.models import Volume
from virt_domain import launcher_pod as contract
from virt_domain.layout import LauncherLayout

from .config import ControllerConfig
from .image_delivery import IMAGE_VOLUME_GATE, deliver_images
from .multus import network_annotations
from .overhead import dedicated_cpu, memory_overhead, vcpu_count
from .rendering import RenderError, check_image_path, restricted_security
from .wellknown import (
    APP_LABEL,
    COMPUTE_CONTAINER,
    CREATED_BY_LABEL,
    DOMAIN_ANNOTATION,
    LAUNCHER_VALUE,
    NODE_SCHEDULABLE_LABEL,
    READINESS_GATE,
    VM_NAME_LABEL,
)

__all__ = [
    "BACKEND_VOLUME",
    "KVM_DEVICE",
    "LAUNCHER_UID",
    "TUN_DEVICE",
    "VHOST_NET_DEVICE",
    "RenderError",
    "compute_resources",
    "render_launcher_pod",
]

KVM_DEVICE = "devices.kubevirt.io/kvm"
TUN_DEVICE = "devices.kubevirt.io/tun"
VHOST_NET_DEVICE = "devices.kubevirt.io/vhost-net"
LAUNCHER_UID = contract.LAUNCHER_UID
DEFAULT_GRACE_PERIOD = 30
# The pod outlives the launcher's own grace period so the launcher can finish the guest.
KILL_AFTER = 15

# The paths the launcher reads the pod's volumes from (the contract's defaults).
_LAYOUT = LauncherLayout()
#: The pod volume of the VM's backend-storage claim (upstream's name).
BACKEND_VOLUME = "vm-state"


def _quantity(table: Mapping[str, Quantity] | None, name: str) -> Quantity | None:
    if not table:
        return None
    found = table.get(name)
    return found if isinstance(found, Quantity) else None


def _cpu_text(value: float) -> str:
    millis = round(value * 1000)
    return f"{millis // 1000}" if millis % 1000 == 0 else f"{millis}m"


def _needs_tun(vmi: VirtualMachineInstance) -> bool:
    devices = vmi.spec.domain.devices
    return bool(devices.interfaces) or devices.autoattach_pod_interface is not False


def _needs_vhost_net(vmi: VirtualMachineInstance, emulation: bool) -> bool:
    if emulation:
        return False
    devices = vmi.spec.domain.devices
    interfaces = devices.interfaces or ()
    if not interfaces:
        return devices.autoattach_pod_interface is not False
    return any(i.model in (None, "", "virtio") for i in interfaces)


def compute_resources(vmi: VirtualMachineInstance, config: ControllerConfig) -> dict[str, Any]:
    """The compute container's requests and limits (strings, Kubernetes' spelling)."""
    domain = vmi.spec.domain
    res = domain.resources
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    for name, q in (res.requests or {}).items() if res is not None else ():
        requests[name] = q
    for name, q in (res.limits or {}).items() if res is not None else ():
        limits[name] = q
    vcpus = vcpu_count(vmi)
    if dedicated_cpu(vmi):
        requests["cpu"] = limits["cpu"] = vcpus
    elif "cpu" not in requests and config.cluster.cpu_allocation_ratio > 0:
        requests["cpu"] = _cpu_text(vcpus / config.cluster.cpu_allocation_ratio)
    # Memory: the request defaults to the limit, else the guest memory (overcommitted).
    if "memory" not in requests:
        if "memory" in limits:
            requests["memory"] = limits["memory"]
        elif domain.memory is not None and domain.memory.guest is not None:
            guest = domain.memory.guest.to_int()
            if config.cluster.memory_overcommit != 100 and not dedicated_cpu(vmi):
                guest = guest * 100 // config.cluster.memory_overcommit
            requests["memory"] = guest
    overhead = memory_overhead(vmi, ratio=config.cluster.additional_overhead_ratio)
    overcommit_overhead = bool(res is not None and res.overcommit_guest_overhead)
    if "memory" in requests and not overcommit_overhead:
        requests["memory"] = _bytes(requests["memory"]) + overhead
    elif "memory" not in requests:
        requests["memory"] = overhead
    if "memory" in limits:
        limits["memory"] = _bytes(limits["memory"]) + overhead
    if dedicated_cpu(vmi):
        limits["memory"] = requests["memory"]
    # Device-plugin resources go to limits; Kubernetes copies them to requests.
    if not config.cluster.use_emulation:
        limits[KVM_DEVICE] = 1
    if _needs_tun(vmi):
        limits[TUN_DEVICE] = 1
    if _needs_vhost_net(vmi, config.cluster.use_emulation):
        limits[VHOST_NET_DEVICE] = 1
    return {
        "requests": {k: _render_quantity(k, v) for k, v in sorted(requests.items())},
        "limits": {k: _render_quantity(k, v) for k, v in sorted(limits.items())},
    }


def _bytes(value: Any) -> int:
    if isinstance(value, Quantity):
        return value.to_int()
    if isinstance(value, int):
        return value
    return Quantity.parse(str(value)).to_int()


def _render_quantity(name: str, value: Any) -> str:
    if isinstance(value, Quantity):
        return str(value)
    if isinstance(value, int) and name in ("memory", "ephemeral-storage"):
        mib, rest = divmod(value, 1024 * 1024)
        return f"{mib}Mi" if rest == 0 else str(value)
    return str(value)


def _container_ports(vmi: VirtualMachineInstance) -> list[dict[str, Any]]:
    # Upstream's containerPortsFromVMI: every interfaces[].ports entry, TCP by default.
    ports: list[dict[str, Any]] = []
    for interface in vmi.spec.domain.devices.interfaces or ():
        for port in interface.ports or ():
            entry: dict[str, Any] = {
                "containerPort": port.port,
                "protocol": str(port.protocol or "TCP"),
            }
            if port.name:
                entry["name"] = port.name
            ports.append(entry)
    return ports


def _grace_period(vmi: VirtualMachineInstance) -> int:
    grace = vmi.spec.termination_grace_period_seconds
    return DEFAULT_GRACE_PERIOD if grace is None else max(0, int(grace))


_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def _volume_name(index: int, name: str) -> str:
    # The VMI's volume name becomes a pod volume name and a path component.
    if not _K8S_NAME.match(name) or ".." in name:
        raise RenderError(
            f"spec.volumes[{index}].name",
            f"{name!r} must be a lowercase DNS name (letters, digits, '-', '.') without '..'",
        )
    return name


def _config_volume(volume: Volume, raw: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The pod volume source of a configMap/secret/downwardAPI VMI volume, by its kind."""
    if volume.config_map is not None:
        source: dict[str, Any] = {"name": volume.config_map.name}
        optional = volume.config_map.optional
        kind = "configMap"
    elif volume.secret is not None:
        source = {"secretName": volume.secret.secret_name}
        optional = volume.secret.optional
        kind = "secret"
    elif volume.downward_api is not None:
        return "downwardAPI", {"items": list((raw.get("downwardAPI") or {}).get("fields") or ())}
    else:
        return None
    if optional is not None:
        source["optional"] = optional
    return kind, source


def _storage_volumes(
    vmi: VirtualMachineInstance, raw_spec: Mapping[str, Any], block_volumes: frozenset[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Pod volumes, compute mounts and compute volumeDevices for claims, host disks and
    config volumes, at the paths virt_domain's LauncherLayout reads them from (upstream's
    paths). A claim whose volume is in `block_volumes` (volumeMode Block) is a device."""
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    devices: list[dict[str, Any]] = []
    raw_volumes = list(raw_spec.get("volumes") or ())
    for index, volume in enumerate(vmi.spec.volumes or ()):
        claim: str | None = None
        read_only = False
        if is_hotplug_volume(raw_volumes[index] if index < len(raw_volumes) else {}):
            continue  # an attachment pod mounts it on the node (hotplug.py)
        if volume.persistent_volume_claim is not None:
            claim = volume.persistent_volume_claim.claim_name
            read_only = bool(volume.persistent_volume_claim.read_only)
        elif volume.data_volume is not None:
            claim = volume.data_volume.name  # a DataVolume's claim has its name
        elif volume.ephemeral is not None and volume.ephemeral.persistent_volume_claim is not None:
            claim = volume.ephemeral.persistent_volume_claim.claim_name
            read_only = True
        pod_name: str
        if claim is not None:
            pod_name = _volume_name(index, volume.name)
            volumes.append(
                {
                    "name": pod_name,
                    "persistentVolumeClaim": {"claimName": claim, "readOnly": read_only},
                }
            )
            if volume.name in block_volumes:
                devices.append(
                    {"name": pod_name, "devicePath": _LAYOUT.block_volume_device(pod_name)}
                )
            else:  # the launcher's image is <dir>/disk.img
                mounts.append({"name": pod_name, "mountPath": _LAYOUT.volume_mount_dir(pod_name)})
        elif volume.host_disk is not None:
            pod_name = _volume_name(index, volume.name)
            path = check_image_path(
                volume.host_disk.path or "", f"spec.volumes[{index}].hostDisk.path"
            )
            kind = "DirectoryOrCreate" if volume.host_disk.type == "DiskOrCreate" else "Directory"
            volumes.append(
                {
                    "name": pod_name,
                    "hostPath": {"path": path.rsplit("/", 1)[0] or "/", "type": kind},
                }
            )
            mounts.append({"name": pod_name, "mountPath": _LAYOUT.volume_mount_dir(pod_name)})
        else:
            config_volume = _config_volume(
                volume, raw_volumes[index] if index < len(raw_volumes) else {}
            )
            if config_volume is None:
                continue
            kind, source = config_volume
            pod_name = _volume_name(index, volume.name)
            volumes.append({"name": pod_name, kind: source})
            mounts.append(
                {
                    "name": pod_name,
                    "mountPath": _LAYOUT.config_volume_dir(kind, pod_name),
                    "readOnly": True,
                }
            )
    return volumes, mounts, devices


def _secret_mount(pod_name: str, path: str, sub_path: str | None = None) -> dict[str, Any]:
    mount: dict[str, Any] = {"name": pod_name, "mountPath": path, "readOnly": True}
    if sub_path is not None:
        mount["subPath"] = sub_path
    return mount


def _cloud_init_secrets(
    vmi: VirtualMachineInstance,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The Secrets a cloud-init volume's user and network data come from, as upstream's
    renderer mounts them: each key its own file under ``secret/<volume>/`` (a key the
    Secret lacks becomes an empty directory there, which the launcher skips)."""
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for index, volume in enumerate(vmi.spec.volumes or ()):
        source = volume.cloud_init_no_cloud or volume.cloud_init_config_drive
        if source is None:
            continue
        refs = ((source.secret_ref, False), (source.network_data_secret_ref, True))
        for ref, network in refs:
            if ref is None or not ref.name:
                continue
            name = _volume_name(index, volume.name)
            pod_name = contract.cloud_init_secret_volume(name, network)
            volumes.append({"name": pod_name, "secret": {"secretName": ref.name}})
            keys = contract.NETWORK_DATA_KEYS if network else contract.USER_DATA_KEYS
            mounts += [
                _secret_mount(pod_name, _LAYOUT.cloud_init_secret_file(name, key), key)
                for key in keys
            ]
    return volumes, mounts


def _access_credential_secrets(
    vmi: VirtualMachineInstance,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each access credential's Secret, mounted whole at ``secret/<name>-access-cred``."""
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, credential in enumerate(vmi.spec.access_credentials or ()):
        secret: str | None = None
        if credential.ssh_public_key is not None and credential.ssh_public_key.source.secret:
            secret = credential.ssh_public_key.source.secret.secret_name
        elif credential.user_password is not None and credential.user_password.source.secret:
            secret = credential.user_password.source.secret.secret_name
        if not secret or secret in seen:
            continue
        seen.add(secret)
        if not _K8S_NAME.match(secret) or ".." in secret:
            raise RenderError(
                f"spec.accessCredentials[{index}]", f"secret name {secret!r} is not a DNS name"
            )
        pod_name = contract.access_credential_volume(secret)
        volumes.append({"name": pod_name, "secret": {"secretName": secret}})
        mounts.append(_secret_mount(pod_name, _LAYOUT.access_credential_dir(secret)))
    return volumes, mounts


def _service_account_volume(vmi: VirtualMachineInstance) -> str | None:
    for volume in vmi.spec.volumes or ():
        if volume.service_account is not None:
            return volume.service_account.service_account_name or "default"
    return None


def render_launcher_pod(
    vmi: VirtualMachineInstance,
    config: ControllerConfig,
    *,
    extra_labels: Mapping[str, str] = {},
    block_volumes: frozenset[str] = frozenset(),
    backend_claim: str | None = None,
    image_volumes: bool | None = None,
    raw: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The launcher Pod for `vmi` (which must have a name, namespace and uid);
    `block_volumes` names the volumes whose claim is in volumeMode Block; `backend_claim`
    is the VM's backend-storage claim (persistent EFI variables), mounted where the
    launcher keeps them; `image_volumes` says how containerDisks and the kernelBoot
    container arrive (see image_delivery), by default as the ImageVolume gate says; `raw`
    is the stored VMI `vmi` was loaded from, when the caller has it (its fields copied
    as they are, without dumping `vmi` again: a millisecond per VMI).

    Raises RenderError naming the field when the VMI cannot be rendered.
    """
    meta = vmi.metadata
    if meta is None:
        raise RenderError("metadata", "name, namespace and uid are required")
    name, namespace, uid = meta.name, meta.namespace, meta.uid
    if not name or not namespace or not uid:
        raise RenderError("metadata", "name, namespace and uid are required")
    raw_spec: Mapping[str, Any] = (dump(vmi) if raw is None else raw).get("spec") or {}
    grace = _grace_period(vmi)
    if image_volumes is None:
        image_volumes = config.cluster.gate(IMAGE_VOLUME_GATE)
    images = deliver_images(
        vmi, config.launcher_image, config.image_pull_policy, image_volumes=image_volumes
    )

    labels = dict(meta.labels or {})
    labels.update({APP_LABEL: LAUNCHER_VALUE, CREATED_BY_LABEL: uid, VM_NAME_LABEL: name})
    labels.update(extra_labels)
    mounts = [{"name": v.name, "mountPath": v.mount_path} for v in contract.VOLUMES]
    mounts += images.mounts
    volumes: list[dict[str, Any]] = [{"name": v.name, "emptyDir": {}} for v in contract.VOLUMES]
    volumes += images.volumes
    storage_volumes, storage_mounts, devices = _storage_volumes(vmi, raw_spec, block_volumes)
    for v in storage_volumes:
        if v["name"] in contract.RESERVED_VOLUMES:
            raise RenderError(
                "spec.volumes", f"volume name {v['name']!r} is reserved for the launcher"
            )
    for render in (_cloud_init_secrets, _access_credential_secrets):
        secret_volumes, secret_mounts = render(vmi)
        storage_volumes += secret_volumes
        storage_mounts += secret_mounts
    taken = {v["name"] for v in volumes}
    for v in storage_volumes:
        if v["name"] in taken:
            raise RenderError(
                "spec.volumes", f"pod volume {v['name']!r} would be rendered twice: rename one"
            )
        taken.add(v["name"])
    volumes += storage_volumes
    mounts += storage_mounts
    if backend_claim is not None:
        if BACKEND_VOLUME in taken:
            raise RenderError(
                "spec.volumes", f"volume name {BACKEND_VOLUME!r} is reserved for the VM's state"
            )
        volumes.append(
            {"name": BACKEND_VOLUME, "persistentVolumeClaim": {"claimName": backend_claim}}
        )
        mounts.append({"name": BACKEND_VOLUME, "mountPath": _LAYOUT.backend_storage_dir})
    args = contract.launcher_args(
        name, namespace, uid, grace_period_seconds=grace, notify_socket=config.notify_socket
    )
    compute: dict[str, Any] = {
        "name": COMPUTE_CONTAINER,
        "image": config.launcher_image,
        "imagePullPolicy": config.image_pull_policy,
        # As the image's own entrypoint runs it (python3 -m virt_launcher).
        "command": ["python3", "-m", "virt_launcher"],
        "args": args,
        "resources": compute_resources(vmi, config),
        "securityContext": {
            **restricted_security(),
            # Upstream's requiredCapabilities: the launcher's DHCP server binds UDP 67.
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
        },
        "volumeMounts": mounts,
    }
    if devices:
        compute["volumeDevices"] = devices
    ports = _container_ports(vmi)
    if ports:
        compute["ports"] = ports
    verbosity = config.cluster.verbosity("virt-launcher")
    if verbosity is not None:
        compute["env"] = [{"name": contract.LOG_VERBOSITY_ENV, "value": str(verbosity)}]
    node_selector = {NODE_SCHEDULABLE_LABEL: "true", **(raw_spec.get("nodeSelector") or {})}
    spec: dict[str, Any] = {
        "hostname": raw_spec.get("hostname") or name,
        "restartPolicy": "Never",
        # libvirtd daemonizes QEMU, so a QEMU that exits is an orphan: the pod's pause
        # process (PID 1 of a shared PID namespace) reaps it. Without it the zombie keeps
        # libvirt from ever seeing the domain stop.
        "shareProcessNamespace": True,
        "terminationGracePeriodSeconds": grace + KILL_AFTER,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsUser": LAUNCHER_UID,
            "runAsGroup": LAUNCHER_UID,
            "runAsNonRoot": True,
            "fsGroup": LAUNCHER_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [compute],
        "volumes": volumes,
        "nodeSelector": node_selector,
        "readinessGates": [{"conditionType": READINESS_GATE}],
    }
    # As upstream: spec.serviceAccountName first, else a serviceAccount volume's account,
    # whose token (mounted only then) the launcher hands the guest as an ISO.
    account_volume = _service_account_volume(vmi)
    account = vmi.spec.service_account_name or account_volume
    if account:
        spec["serviceAccountName"] = account
    if account_volume is not None:
        spec["automountServiceAccountToken"] = True
    if images.init_containers:
        spec["initContainers"] = images.init_containers
    if images.pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in dict.fromkeys(images.pull_secrets)]
    for key in (
        "subdomain",
        "affinity",
        "tolerations",
        "topologySpreadConstraints",
        "priorityClassName",
        "schedulerName",
        "dnsConfig",
        "dnsPolicy",
    ):
        if raw_spec.get(key):
            spec[key] = raw_spec[key]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"virt-launcher-{name}-",
            "namespace": namespace,
            "labels": labels,
            "annotations": {
                DOMAIN_ANNOTATION: name,
                "kubectl.kubernetes.io/default-container": COMPUTE_CONTAINER,
                **network_annotations(vmi),
            },
            "ownerReferences": [
                {
                    "apiVersion": "kubevirt.io/v1",
                    "kind": "VirtualMachineInstance",
                    "name": name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }
