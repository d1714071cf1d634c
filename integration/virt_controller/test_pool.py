"""A VirtualMachinePool scales 0 -> 3 -> 1 (kubectl scale, then the scale subresource) with
upstream's VM names, and its VMs go with it."""

from __future__ import annotations

import asyncio
from typing import Any

from kube_runtime import (
    CONTROLLER_REVISIONS,
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINES,
    KubeClient,
)
from kubevirt_api.resources import VIRTUAL_MACHINE_POOLS as POOLS
from kv_cluster.kubectl import Kubectl


def pool_body(name: str, namespace: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "pool.kubevirt.io/v1beta1",
        "kind": "VirtualMachinePool",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"pool": name}},
            # Upstream's default order is Random; the test names the survivor.
            "scaleInStrategy": {
                "proactive": {"selectionPolicy": {"sortPolicy": "DescendingOrder"}}
            },
            "virtualMachineTemplate": {
                "metadata": {"labels": {"pool": name}},
                "spec": {
                    "runStrategy": "Always",
                    "template": {
                        "metadata": {"labels": {"pool": name}},
                        "spec": {
                            "domain": {
                                "devices": {},
                                "resources": {"requests": {"memory": "64Mi"}},
                            },
                            "terminationGracePeriodSeconds": 0,
                        },
                    },
                },
            },
        },
    }


async def test_pool_scales_zero_to_three_to_one(
    client: KubeClient, namespace: str, controller: Any, kv: Any, controller_cluster: Any
) -> None:
    await client.create(POOLS, pool_body("web", namespace, 0))

    async def status_is(replicas: int) -> Any:
        pool = await client.get(POOLS, "web", namespace)
        status = pool.get("status") or {}
        return status if status.get("replicas") == replicas else None

    status = await kv.eventually(lambda: status_is(0), what="status.replicas 0")
    assert status["labelSelector"] == "pool=web"

    async def vm_names() -> list[str]:
        body = await client.list(VIRTUAL_MACHINES, namespace, label_selector="pool=web")
        return sorted(
            v["metadata"]["name"]
            for v in body["items"]
            if not v["metadata"].get("deletionTimestamp")
        )

    async def settled(names: list[str]) -> Any:
        vmis = await client.list(VIRTUAL_MACHINE_INSTANCES, namespace, label_selector="pool=web")
        live = sorted(
            v["metadata"]["name"]
            for v in vmis["items"]
            if not v["metadata"].get("deletionTimestamp")
        )
        if await vm_names() == names and live == names and await status_is(len(names)):
            return names
        return None

    kubectl = Kubectl(controller_cluster.kubeconfig)
    scaled = await asyncio.to_thread(
        kubectl.run, "scale", "virtualmachinepool/web", "--replicas=3", "-n", namespace
    )
    assert "scaled" in scaled.stdout
    await kv.eventually(
        lambda: settled(["web-0", "web-1", "web-2"]), what="VMs and VMIs web-0..web-2"
    )
    vm = await client.get(VIRTUAL_MACHINES, "web-1", namespace)
    owner = vm["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == (
        "VirtualMachinePool",
        "web",
        True,
    )
    # The ControllerRevision of the pool's spec at its generation (scaling bumped it).
    pool = await client.get(POOLS, "web", namespace)
    revision = vm["metadata"]["labels"]["kubevirt.io/vm-pool-revision-name"]
    assert revision == f"web-{pool['metadata']['generation']}"
    await client.get(CONTROLLER_REVISIONS, revision, namespace)

    await client.merge_patch(
        POOLS, "web", {"spec": {"replicas": 1}}, namespace, subresource="scale"
    )
    await kv.eventually(lambda: settled(["web-0"]), what="only web-0 left")
    scale_view = await client.request("GET", POOLS.path(namespace, "web", "scale"))
    assert scale_view["spec"]["replicas"] == 1
    assert scale_view["status"]["replicas"] == 1
    assert scale_view["status"]["selector"] == "pool=web"

    # The pool lets go of its VMs; the garbage collector then deletes them.
    await client.delete(POOLS, "web", namespace)

    async def all_gone() -> bool:
        pools = await client.list(POOLS, namespace)
        return not pools["items"] and not await vm_names()

    await kv.eventually(all_gone, what="the pool and its VMs deleted")


async def test_a_template_change_reaches_the_vms_and_restarts_their_vmis(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.create(POOLS, pool_body("db", namespace, 2))

    async def vmis(**labels: str) -> dict[str, str] | None:
        selector = ",".join(f"{k}={v}" for k, v in {"pool": "db", **labels}.items())
        body = await client.list(VIRTUAL_MACHINE_INSTANCES, namespace, label_selector=selector)
        live = {
            v["metadata"]["name"]: v["metadata"]["uid"]
            for v in body["items"]
            if not v["metadata"].get("deletionTimestamp")
        }
        return live if sorted(live) == ["db-0", "db-1"] else None

    first = await kv.eventually(vmis, what="VMIs db-0 and db-1")
    change = {"spec": {"template": {"metadata": {"labels": {"tier": "two"}}}}}
    await client.merge_patch(POOLS, "db", {"spec": {"virtualMachineTemplate": change}}, namespace)

    # The VMs get the new template; their VMIs (not ready here: no kubelet runs the pods)
    # are restarted from it.
    second = await kv.eventually(lambda: vmis(tier="two"), what="VMIs from the new template")
    assert set(second.values()).isdisjoint(first.values())
    vm = await client.get(VIRTUAL_MACHINES, "db-0", namespace)
    assert vm["spec"]["template"]["metadata"]["labels"]["tier"] == "two"
    pool = await client.get(POOLS, "db", namespace)
    assert vm["metadata"]["labels"]["kubevirt.io/vm-pool-revision-name"] == (
        f"db-{pool['metadata']['generation']}"
    )
