"""virt-controller under its own ServiceAccount (virt_operator/components/virt-controller/rbac.yaml) does
its whole job (instancetypes and their revisions included), and a second replica takes
over when the leader is killed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kube_runtime import (
    CONTROLLER_REVISIONS,
    LEASES,
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINES,
    KubeClient,
)
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCE_REPLICASETS as SETS
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCETYPES
from kubevirt_api.resources import VIRTUAL_MACHINE_POOLS as POOLS


def _vm(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "least", "namespace": namespace},
        "spec": {
            "runStrategy": "Always",
            "template": {
                "spec": {
                    "domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}},
                    "terminationGracePeriodSeconds": 0,
                }
            },
        },
    }


async def test_service_account_is_enough(
    client: KubeClient,
    namespace: str,
    sa_kubeconfig: Path,
    controller_factory: Any,
    kv: Any,
) -> None:
    process = controller_factory(sa_kubeconfig)
    await client.create(VIRTUAL_MACHINES, _vm(namespace))

    async def vmi_phase(phase: str) -> bool:
        vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "least", namespace)
        return bool(vmi and (vmi.get("status") or {}).get("phase") == phase)

    await kv.eventually(lambda: vmi_phase("Scheduled"), what="VMI Scheduled")
    await client.create(
        SETS,
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstanceReplicaSet",
            "metadata": {"name": "few", "namespace": namespace},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"set": "few"}},
                "template": {
                    "metadata": {"labels": {"set": "few"}},
                    "spec": {"domain": {"devices": {}}, "terminationGracePeriodSeconds": 0},
                },
            },
        },
    )

    async def set_ready() -> bool:
        rs = await client.get(SETS, "few", namespace)
        return bool((rs.get("status") or {}).get("replicas") == 2)

    await kv.eventually(set_ready, what="replica set status.replicas 2")
    pool = {
        "apiVersion": "pool.kubevirt.io/v1beta1",
        "kind": "VirtualMachinePool",
        "metadata": {"name": "some", "namespace": namespace},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"pool": "some"}},
            "virtualMachineTemplate": {
                "metadata": {"labels": {"pool": "some"}},
                "spec": {
                    "runStrategy": "Halted",
                    "template": {"spec": {"domain": {"devices": {}}}},
                },
            },
        },
    }
    await client.create(POOLS, pool)

    async def pool_vms() -> list[str]:
        body = await client.list(VIRTUAL_MACHINES, namespace, label_selector="pool=some")
        return sorted(v["metadata"]["name"] for v in body["items"])

    async def pool_ready() -> bool:
        status = (await client.get(POOLS, "some", namespace)).get("status") or {}
        return status.get("replicas") == 2 and await pool_vms() == ["some-0", "some-1"]

    await kv.eventually(pool_ready, what="pool status.replicas 2 with VMs some-0, some-1")
    await client.delete(POOLS, "some", namespace)

    async def pool_gone() -> bool:
        return not (await client.list(POOLS, namespace))["items"] and not await pool_vms()

    await kv.eventually(pool_gone, what="the pool and its VMs deleted")
    await client.merge_patch(
        VIRTUAL_MACHINES, "least", {"spec": {"runStrategy": "Halted"}}, namespace
    )

    async def stopped() -> bool:
        vm = await client.get(VIRTUAL_MACHINES, "least", namespace)
        vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "least", namespace)
        return vmi is None and (vm.get("status") or {}).get("printableStatus") == "Stopped"

    await kv.eventually(stopped, what="VM stopped")
    logs = process.logs()
    # An RBAC refusal is logged as '... is forbidden: User "<sa>" cannot <verb> resource ...'.
    # Not any "403": that matches timestamps (22:41:10.940403Z) and the refusals of writes
    # into other tests' terminating namespaces.
    assert not re.search(r"is forbidden: User \S+ cannot ", logs), logs[-2000:]


async def test_second_replica_takes_over_after_kill(
    client: KubeClient, namespace: str, controller_cluster: Any, controller_factory: Any, kv: Any
) -> None:
    first = controller_factory(controller_cluster.kubeconfig)

    async def holder() -> str:
        lease = await kv.get_or_none(client, LEASES, "virt-controller", "kubevirt")
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

    leader = await kv.eventually(holder, what="a leader")
    second = controller_factory(controller_cluster.kubeconfig)
    await client.create(VIRTUAL_MACHINES, _vm(namespace))

    async def vmi_scheduled() -> bool:
        vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "least", namespace)
        return bool(vmi and (vmi.get("status") or {}).get("phase") == "Scheduled")

    await kv.eventually(vmi_scheduled, what="VMI Scheduled")
    (first if str(first.proc.pid) in leader else second).kill()

    async def new_holder() -> str:
        current = await holder()
        return current if current and current != leader else ""

    await kv.eventually(new_holder, within=30, what="the lease taken over")
    # The survivor acts: stopping the VM removes its VMI.
    await client.merge_patch(
        VIRTUAL_MACHINES, "least", {"spec": {"runStrategy": "Halted"}}, namespace
    )

    async def gone() -> bool:
        return await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "least", namespace) is None

    await kv.eventually(gone, what="VMI deleted by the new leader")


async def test_service_account_reads_instancetypes_and_stores_revisions(
    client: KubeClient,
    namespace: str,
    sa_kubeconfig: Path,
    controller_factory: Any,
    kv: Any,
) -> None:
    process = controller_factory(sa_kubeconfig)
    itype = await client.create(
        VIRTUAL_MACHINE_INSTANCETYPES,
        {
            "apiVersion": "instancetype.kubevirt.io/v1beta1",
            "kind": "VirtualMachineInstancetype",
            "metadata": {"name": "u1.small", "namespace": namespace},
            "spec": {"cpu": {"guest": 1}, "memory": {"guest": "2Gi"}},
        },
    )
    vm = _vm(namespace)
    vm["spec"]["instancetype"] = {"name": "u1.small", "kind": "VirtualMachineInstancetype"}
    vm["spec"]["template"]["spec"]["domain"] = {"devices": {}}
    await client.create(VIRTUAL_MACHINES, vm)

    async def vmi() -> Any:
        return await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "least", namespace)

    created = await kv.eventually(vmi, what="the VMI")
    assert created["spec"]["domain"]["memory"] == {"guest": "2Gi"}
    assert created["metadata"]["annotations"]["kubevirt.io/instancetype-name"] == "u1.small"
    meta = itype["metadata"]
    name = f"least-u1.small-v1beta1-{meta['uid']}-{meta['generation']}"
    revision = await kv.get_or_none(client, CONTROLLER_REVISIONS, name, namespace)
    assert revision is not None
    assert revision["data"]["spec"] == {"cpu": {"guest": 1}, "memory": {"guest": "2Gi"}}
    assert not re.search(r"is forbidden: User \S+ cannot ", process.logs()), process.logs()[-2000:]
