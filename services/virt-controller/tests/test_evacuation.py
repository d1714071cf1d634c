"""The evacuation controller creates a migration for each VMI the eviction webhook marked
(or on a drain-tainted node) that wants to and can migrate; evacuations back off."""

from __future__ import annotations

import itertools
from typing import Any, cast

from kube_runtime import KubeClient, ManualClock, RawObject, WorkQueue
from kube_runtime.fakes import FakeListWatch
from kube_runtime.informers import SharedInformer
from kubevirt_api import ClusterConfig
from virt_controller.config import ControllerConfig
from virt_controller.evacuation import (
    EVACUATION_INDEX,
    EvacuationController,
    index_by_evacuation_node,
)
from virt_controller.node import NODE_INDEX
from virt_controller.objects import index_by_controller, index_by_node
from virt_controller.vmi import OWNER_INDEX

MIGRATABLE = {"type": "LiveMigratable", "status": "True"}


class CreatingApi:
    """Creates what it is asked to, as the API server names generateName objects."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.ids = itertools.count(1)

    async def create(self, resource: Any, body: Any, namespace: str | None = None) -> Any:
        self.created.append(body)
        return {"metadata": {"name": f"{body['metadata']['generateName']}{next(self.ids)}"}}


def informer(name: str, **indexers: Any) -> SharedInformer[RawObject]:
    return SharedInformer(FakeListWatch(), name=name, indexers=indexers or None)


def guest(name: str, strategy: str | None = "LiveMigrate", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"{name}-uid"},
        "spec": {"evictionStrategy": strategy} if strategy else {},
        "status": {"phase": "Running", "nodeName": "node-a", "conditions": [MIGRATABLE], **status},
    }


def setup(
    kubevirt: dict[str, Any] | None = None,
) -> tuple[EvacuationController, CreatingApi, SharedInformer[RawObject], SharedInformer[RawObject]]:
    api = CreatingApi()
    nodes = informer("nodes")
    vmis = informer(
        "vmis", **{NODE_INDEX: index_by_node, EVACUATION_INDEX: index_by_evacuation_node}
    )
    migrations = informer("migrations")
    pods = informer("pods", **{OWNER_INDEX: index_by_controller("VirtualMachineInstance")})
    config = ControllerConfig(cluster=ClusterConfig.from_kubevirt(kubevirt))
    ctl = EvacuationController(
        cast(KubeClient, api),
        nodes,
        vmis,
        migrations,
        pods,
        WorkQueue("t", clock=ManualClock()),
        lambda: config,
    )
    nodes.store.upsert({"metadata": {"name": "node-a"}, "spec": {}})
    return ctl, api, vmis, migrations


async def test_a_marked_vmi_gets_an_evacuation_migration() -> None:
    ctl, api, vmis, _ = setup()
    vmis.store.upsert(guest("marked", evacuationNodeName="node-a"))
    vmis.store.upsert(guest("unmarked"))
    await ctl.reconcile("node-a")
    (created,) = api.created
    assert created["spec"] == {"vmiName": "marked", "priority": "system-critical"}
    assert created["metadata"]["generateName"] == "kubevirt-evacuation-"
    assert created["metadata"]["annotations"] == {"kubevirt.io/evacuationMigration": "node-a"}
    # Until the informer shows it, nothing more is created.
    await ctl.reconcile("node-a")
    assert len(api.created) == 1


async def test_only_vmis_that_want_and_can_migrate_are_evacuated() -> None:
    ctl, api, vmis, migrations = setup()
    marked = {"evacuationNodeName": "node-a"}
    vmis.store.upsert(guest("no-strategy", strategy=None, **marked))
    vmis.store.upsert(guest("not-migratable", conditions=[], **marked))
    vmis.store.upsert(guest("moved", **{"evacuationNodeName": "node-a", "nodeName": "node-a"}))
    migrations.store.upsert(
        {"metadata": {"name": "m", "namespace": "ns"}, "spec": {"vmiName": "moved"}}
    )
    vmis.store.upsert(guest("if-possible", strategy="LiveMigrateIfPossible", **marked))
    await ctl.reconcile("node-a")
    created = api.created
    assert [c["spec"]["vmiName"] for c in created] == ["if-possible"]


async def test_the_drain_taint_evacuates_every_vmi_of_the_node() -> None:
    ctl, api, vmis, _ = setup()
    ctl.nodes.store.upsert(
        {
            "metadata": {"name": "node-a"},
            "spec": {"taints": [{"key": "kubevirt.io/drain", "effect": "NoSchedule"}]},
        }
    )
    vmis.store.upsert(guest("one"))
    vmis.store.upsert(guest("two"))
    await ctl.reconcile("node-a")
    assert len(api.created) == 2
