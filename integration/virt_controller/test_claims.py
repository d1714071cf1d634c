"""A VMI's PVC volume on the real control plane: the launcher pod waits for the claim, then
mounts it; the VMI reports the claim in status.volumeStatus."""

from __future__ import annotations

from typing import Any

from kube_runtime import PERSISTENT_VOLUME_CLAIMS, VIRTUAL_MACHINE_INSTANCES, KubeClient


def _vmi(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "stateful", "namespace": namespace},
        "spec": {
            "domain": {
                "devices": {"disks": [{"name": "data", "disk": {"bus": "virtio"}}]},
                "resources": {"requests": {"memory": "128Mi"}},
            },
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            "terminationGracePeriodSeconds": 0,
        },
    }


def _claim(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "64Mi"}},
            # No provisioner here: the claim exists but stays Pending, which is enough.
            "storageClassName": "",
        },
    }


async def test_the_pod_waits_for_its_claim_then_mounts_it_and_the_vmi_reports_it(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.create(VIRTUAL_MACHINE_INSTANCES, _vmi(namespace))

    async def waiting() -> Any:
        vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "stateful", namespace)
        for c in ((vmi or {}).get("status") or {}).get("conditions") or ():
            if c["type"] == "Synchronized" and c.get("reason") == "FailedPvcNotFound":
                return c
        return None

    synced = await kv.eventually(waiting, what="Synchronized=False FailedPvcNotFound")
    assert synced["status"] == "False"
    assert synced["message"] == f"PVC {namespace}/data does not exist, waiting for it to appear"
    assert await kv.launcher_pods(client, namespace) == []

    await client.create(PERSISTENT_VOLUME_CLAIMS, _claim(namespace))
    (pod,) = await kv.eventually(
        lambda: kv.launcher_pods(client, namespace), what="the launcher pod"
    )
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == "data"
    (compute,) = [c for c in pod["spec"]["containers"] if c["name"] == "compute"]
    mounts = {m["name"]: m["mountPath"] for m in compute["volumeMounts"]}
    assert mounts["data"] == "/var/run/kubevirt-private/vmi-disks/data"

    async def reported() -> Any:
        vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "stateful", namespace)
        statuses = ((vmi or {}).get("status") or {}).get("volumeStatus") or []
        return statuses if statuses and "persistentVolumeClaimInfo" in statuses[0] else None

    (status,) = await kv.eventually(reported, what="volumeStatus with the claim")
    assert status["name"] == "data"
    info = status["persistentVolumeClaimInfo"]
    assert info["claimName"] == "data"
    assert info["accessModes"] == ["ReadWriteOnce"]
    assert info["volumeMode"] == "Filesystem"
    assert info["requests"] == {"storage": "64Mi"}
    assert "capacity" not in info  # not bound: no capacity yet
