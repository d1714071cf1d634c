"""The pod-eviction webhook: a launcher pod of a VMI that should live-migrate is not
evicted (429, upstream's messages); the VMI is marked with status.evacuationNodeName."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from kubevirt_api.admission import ClusterConfig
from virt_api import AdmissionContext, FrontProxyConfig, SubresourceContext, build_app
from virt_api.defaulting import default_migration

POD_PATH = "/api/v1/namespaces/ns1/pods/virt-launcher-vmi1-abcde"
VMI_PATH = "/apis/kubevirt.io/v1/namespaces/ns1/virtualmachineinstances/vmi1"
MIGRATABLE = {"type": "LiveMigratable", "status": "True"}


def review(dry_run: bool = False, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    eviction: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "virt-launcher-vmi1-abcde", "namespace": "ns1"},
    }
    if annotations:
        eviction["metadata"]["annotations"] = annotations
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "e1",
            "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "operation": "CREATE",
            "namespace": "ns1",
            "name": "virt-launcher-vmi1-abcde",
            "object": eviction,
            "dryRun": dry_run,
            "userInfo": {"username": "kubectl-drain"},
        },
    }


def launcher(node: str = "node-a", phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "virt-launcher-vmi1-abcde",
            "labels": {"kubevirt.io": "virt-launcher"},
            "annotations": {"kubevirt.io/domain": "vmi1"},
        },
        "spec": {"nodeName": node},
        "status": {"phase": phase},
    }


def vmi(strategy: str | None = "LiveMigrate", **status: Any) -> dict[str, Any]:
    spec = {"evictionStrategy": strategy} if strategy else {}
    return {
        "metadata": {"name": "vmi1", "namespace": "ns1"},
        "spec": spec,
        "status": {"phase": "Running", "nodeName": "node-a", "conditions": [MIGRATABLE], **status},
    }


async def evict(api: Any, no_handler: Any, body: dict[str, Any], cluster: ClusterConfig | None = None) -> dict[str, Any]:  # fmt: skip
    async def config() -> ClusterConfig:
        return cluster or ClusterConfig()

    app = build_app(
        AdmissionContext(cluster_config=config, api=api.client),
        SubresourceContext(api.client, FrontProxyConfig(), no_handler),
    )
    async with TestClient(TestServer(app)) as client:
        response = await client.post("/pod-eviction-validate", json=body)
        answer: dict[str, Any] = (await response.json())["response"]
        return answer


async def test_a_migratable_vmi_is_marked_and_its_pod_not_evicted(
    fake_api: Any, no_handler: Any
) -> None:
    fake_api.objects[POD_PATH] = launcher()
    fake_api.objects[VMI_PATH] = vmi()
    answer = await evict(fake_api, no_handler, review())
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 429
    assert answer["status"]["message"] == 'Eviction triggered evacuation of VMI "ns1/vmi1"'
    ((path, ops, query),) = fake_api.patches()
    assert path == VMI_PATH
    assert ops == [{"op": "add", "path": "/status/evacuationNodeName", "value": "node-a"}]
    assert "dryRun" not in query


async def test_the_cluster_wide_strategy_applies_and_a_dry_run_stays_dry(
    fake_api: Any, no_handler: Any
) -> None:
    fake_api.objects[POD_PATH] = launcher()
    fake_api.objects[VMI_PATH] = vmi(strategy=None)
    cluster = ClusterConfig.from_kubevirt({"spec": {"configuration": {"evictionStrategy": "LiveMigrate"}}})  # fmt: skip
    answer = await evict(fake_api, no_handler, review(dry_run=True), cluster)
    assert answer["status"]["code"] == 429
    ((_, _, query),) = fake_api.patches()
    assert query["dryRun"] == "All"


async def test_a_descheduler_eviction_is_recorded_on_the_vmi(
    fake_api: Any, no_handler: Any
) -> None:
    fake_api.objects[POD_PATH] = launcher()
    fake_api.objects[VMI_PATH] = vmi()
    await evict(
        fake_api, no_handler, review(annotations={"requested-by": "sigs.k8s.io/descheduler"})
    )
    ((_, ops, _),) = fake_api.patches()
    assert ops[-1] == {
        "op": "add",
        "path": "/metadata/annotations",
        "value": {"kubevirt.io/eviction-source": "descheduler"},
    }


async def test_refusals_say_why(fake_api: Any, no_handler: Any) -> None:
    fake_api.objects[POD_PATH] = launcher()
    fake_api.objects[VMI_PATH] = vmi(conditions=[{"type": "LiveMigratable", "status": "False"}])
    answer = await evict(fake_api, no_handler, review())
    assert answer["status"]["message"] == (
        "VMI vmi1 is configured with an eviction strategy but is not live-migratable"
    )
    fake_api.objects[VMI_PATH] = vmi(evacuationNodeName="node-a")
    answer = await evict(fake_api, no_handler, review())
    assert answer["status"]["message"] == (
        'Evacuation in progress: Eviction triggered evacuation of VMI "ns1/vmi1"'
    )
    fake_api.objects[POD_PATH] = launcher(node="node-b")
    fake_api.objects[VMI_PATH] = vmi()
    answer = await evict(fake_api, no_handler, review())
    assert answer["status"]["message"] == "Eviction request for target Pod"
    assert fake_api.patches() == []


async def test_other_evictions_pass(fake_api: Any, no_handler: Any) -> None:
    assert (await evict(fake_api, no_handler, review()))["allowed"] is True  # no such pod
    fake_api.objects[POD_PATH] = launcher(phase="Succeeded")
    fake_api.objects[VMI_PATH] = vmi()
    assert (await evict(fake_api, no_handler, review()))["allowed"] is True
    fake_api.objects[POD_PATH] = launcher()
    fake_api.objects[VMI_PATH] = vmi(strategy="None")
    assert (await evict(fake_api, no_handler, review()))["allowed"] is True
    fake_api.objects[VMI_PATH] = vmi(strategy="LiveMigrateIfPossible", conditions=[])
    assert (await evict(fake_api, no_handler, review()))["allowed"] is True
    assert fake_api.patches() == []


def test_the_mutator_adds_the_selector_label_and_the_finalizer() -> None:
    out = default_migration({"metadata": {"name": "m"}, "spec": {"vmiName": "vmi1"}}, True)
    assert out["metadata"]["labels"] == {"kubevirt.io/vmi-name": "vmi1"}
    assert out["metadata"]["finalizers"] == ["kubevirt.io/migrationJobFinalize"]
