"""virt-controller under its own ServiceAccount (manifests/virt-controller/rbac.yaml) does
its whole job, and a second replica takes over when the leader is killed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_runtime import LEASES, VIRTUAL_MACHINE_INSTANCES, VIRTUAL_MACHINES, KubeClient
from kubevirt_api.resources import VIRTUAL_MACHINE_INSTANCE_REPLICASETS as SETS
from kv_cluster.kubectl import Kubectl

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def sa_kubeconfig(controller_cluster: Any, tmp_path: Path) -> Path:
    """A kubeconfig holding a token of the kubevirt-controller ServiceAccount."""
    admin = controller_cluster.kubeconfig
    kubectl = Kubectl(admin)
    kubectl.run("apply", "-f", str(REPO / "manifests" / "virt-controller" / "rbac.yaml"))
    token = kubectl.run(
        "create", "token", "kubevirt-controller", "-n", "kubevirt", "--duration=1h"
    ).stdout.strip()
    cluster = yaml.safe_load(admin.read_text())["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kv", "cluster": cluster}],
        "users": [{"name": "virt-controller", "user": {"token": token}}],
        "contexts": [{"name": "kv", "context": {"cluster": "kv", "user": "virt-controller"}}],
        "current-context": "kv",
    }
    path = tmp_path / "virt-controller.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


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
