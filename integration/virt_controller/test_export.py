"""VirtualMachineExports against the real API server, with virt-controller as a process:
a VM without PVCs is Skipped (VMNoVolumes); a bound PVC gets its Service, token and TLS
Secrets and exporter pod, and is Ready with upstream's links once the pod is; a running
VM's claim is InUse; the TTL's end deletes the export and the garbage collector its
objects; under the kubevirt-controller ServiceAccount the RBAC is enough. No kubelet runs
here: the test plays its part (the exporter pod's Ready status).
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

from kube_runtime import (
    PERSISTENT_VOLUME_CLAIMS,
    PODS,
    SECRETS,
    SERVICES,
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINES,
    KubeClient,
    Resource,
)
from kubevirt_api.resources import VIRTUAL_MACHINE_EXPORTS as EXPORTS

PERSISTENT_VOLUMES = Resource("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)


def export_body(name: str, namespace: str, source: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "export.kubevirt.io/v1",
        "kind": "VirtualMachineExport",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"source": source, **spec},
    }


def vm_body(
    name: str, namespace: str, volumes: list[dict[str, Any]], run_strategy: str = "Halted"
) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runStrategy": run_strategy,
            "template": {
                "spec": {
                    "domain": {
                        "devices": {},
                        "resources": {"requests": {"memory": "64Mi"}},
                    },
                    "volumes": volumes,
                }
            },
        },
    }


async def bound_claim(client: KubeClient, namespace: str, name: str, kv: Any) -> None:
    """A PVC bound to a static hostPath PV (the PV controller binds them)."""
    pv = f"{namespace}-{name}"
    await client.create(
        PERSISTENT_VOLUMES,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "64Mi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": "",
                "hostPath": {"path": f"/tmp/kvc-export/{pv}"},
                "claimRef": {"namespace": namespace, "name": name},
            },
        },
    )
    await client.create(
        PERSISTENT_VOLUME_CLAIMS,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": pv,
                "resources": {"requests": {"storage": "64Mi"}},
            },
        },
    )

    async def bound() -> Any:
        claim = await client.get(PERSISTENT_VOLUME_CLAIMS, name, namespace)
        return (claim.get("status") or {}).get("phase") == "Bound"

    await kv.eventually(bound, what=f"PVC {name} Bound")


def condition(export: dict[str, Any], kind: str) -> dict[str, Any]:
    (found,) = [c for c in export["status"]["conditions"] if c["type"] == kind]
    return found


async def test_a_vm_without_pvcs_is_skipped(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    volumes = [{"name": "root", "containerDisk": {"image": "kubevirt-py/guest-containerdisk"}}]
    await client.create(VIRTUAL_MACHINES, vm_body("cd-only", namespace, volumes))
    source = {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "cd-only"}
    await client.create(EXPORTS, export_body("cd-only", namespace, source))

    async def skipped() -> Any:
        export = await client.get(EXPORTS, "cd-only", namespace)
        return export if (export.get("status") or {}).get("phase") == "Skipped" else None

    export = await kv.eventually(skipped, what="export Skipped")
    ready = condition(export, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "VMNoVolumes")
    assert ready["message"] == f"Virtual Machine {namespace}/cd-only has no volumes"
    assert export["status"]["virtualMachineName"] == "cd-only"
    assert await kv.get_or_none(client, PODS, "virt-export-cd-only", namespace) is None


async def test_a_bound_pvc_is_exported_then_expires(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await bound_claim(client, namespace, "disk", kv)
    source = {"apiGroup": "", "kind": "PersistentVolumeClaim", "name": "disk"}
    await client.create(EXPORTS, export_body("exp", namespace, source, ttlDuration="40s"))

    pod = await kv.eventually(
        lambda: kv.get_or_none(client, PODS, "virt-export-exp", namespace), what="exporter pod"
    )
    (container,) = pod["spec"]["containers"]
    assert {"name": "volume0", "mountPath": "/export-volumes/disk", "readOnly": True} in container[
        "volumeMounts"
    ]
    service = await client.get(SERVICES, "virt-export-exp", namespace)
    assert service["spec"]["ports"][0]["port"] == 443
    assert service["spec"]["ports"][0]["targetPort"] == 8443
    token = await client.get(SECRETS, "export-token-exp", namespace)
    assert len(base64.b64decode(token["data"]["token"])) == 20
    tls = await client.get(SECRETS, "virt-export-cert-exp", namespace)
    assert tls["type"] == "kubernetes.io/tls"

    async def phase_is(wanted: str) -> Any:
        export = await client.get(EXPORTS, "exp", namespace)
        return export if (export.get("status") or {}).get("phase") == wanted else None

    pending = await kv.eventually(lambda: phase_is("Pending"), what="export Pending")
    assert pending["status"]["tokenSecretRef"] == "export-token-exp"
    assert pending["status"]["serviceName"] == "virt-export-exp"
    assert condition(pending, "PVCReady")["reason"] == "PVCBound"

    # The kubelet's part: the exporter runs and passes its readiness probe.
    await client.patch_status(
        PODS,
        "virt-export-exp",
        {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {
                    "name": "exportserver",
                    "ready": True,
                    "restartCount": 0,
                    "image": container["image"],
                    "imageID": "",
                    "state": {"running": {}},
                }
            ],
        },
        namespace,
    )
    ready = await kv.eventually(lambda: phase_is("Ready"), what="export Ready")
    internal = ready["status"]["links"]["internal"]
    host = f"virt-export-exp.{namespace}.svc"
    assert internal["volumes"] == [
        {
            "name": "disk",
            "formats": [
                {"format": "raw", "url": f"https://{host}/volumes/disk/disk.img"},
                {"format": "gzip", "url": f"https://{host}/volumes/disk/disk.img.gz"},
            ],
        }
    ]
    assert internal["cert"].startswith("-----BEGIN CERTIFICATE-----")
    assert condition(ready, "Ready")["reason"] == "PodReady"

    # The TTL's end: the export goes, and its objects with it (they are owned by it).
    await kv.eventually(
        lambda: _gone(client, EXPORTS, "exp", namespace, kv), within=90, what="export deleted"
    )
    await kv.eventually(
        lambda: _gone(client, SECRETS, "export-token-exp", namespace, kv),
        within=60,
        what="token Secret collected",
    )


async def _gone(client: KubeClient, resource: Resource, name: str, namespace: str, kv: Any) -> bool:
    return await kv.get_or_none(client, resource, name, namespace) is None


async def test_a_running_vms_claim_is_in_use(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await bound_claim(client, namespace, "root", kv)
    volumes = [{"name": "root", "persistentVolumeClaim": {"claimName": "root"}}]
    await client.create(VIRTUAL_MACHINES, vm_body("busy", namespace, volumes, "Always"))
    # The VM controller starts it: a VMI that has not ended (no launcher need ever run).
    await kv.eventually(
        lambda: kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "busy", namespace),
        what="the VM's VMI",
    )
    source = {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "busy"}
    await client.create(EXPORTS, export_body("busy", namespace, source))

    async def in_use() -> Any:
        export = await client.get(EXPORTS, "busy", namespace)
        conditions = (export.get("status") or {}).get("conditions") or ()
        return any(c["type"] == "Ready" and c.get("reason") == "InUse" for c in conditions)

    await kv.eventually(in_use, what="Ready reason InUse")
    export = await client.get(EXPORTS, "busy", namespace)
    assert export["status"]["phase"] == "Pending"
    assert condition(export, "Ready")["message"] == f"Virtual Machine {namespace}/busy is running"
    assert await kv.get_or_none(client, PODS, "virt-export-busy", namespace) is None


async def test_the_service_accounts_rbac_is_enough_for_exports(
    client: KubeClient, namespace: str, sa_kubeconfig: Path, controller_factory: Any, kv: Any
) -> None:
    process = controller_factory(sa_kubeconfig)
    await bound_claim(client, namespace, "disk", kv)
    source = {"apiGroup": "", "kind": "PersistentVolumeClaim", "name": "disk"}
    await client.create(EXPORTS, export_body("least", namespace, source, ttlDuration="30s"))
    await kv.eventually(
        lambda: kv.get_or_none(client, PODS, "virt-export-least", namespace),
        what="exporter pod (Service, token and TLS Secrets made first)",
    )

    async def pending() -> Any:
        export = await client.get(EXPORTS, "least", namespace)
        return (export.get("status") or {}).get("tokenSecretRef") == "export-token-least"

    await kv.eventually(pending, what="status written")
    # The TTL's end: deleting the export needs its own verb.
    await kv.eventually(
        lambda: _gone(client, EXPORTS, "least", namespace, kv), within=90, what="export deleted"
    )
    logs = process.logs()
    assert not re.search(r"is forbidden: User \S+ cannot ", logs), logs[-2000:]
