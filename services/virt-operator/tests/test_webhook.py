"""BlockUninstallIfWorkloadsExist: the operator's webhook refuses the CR's deletion."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from kubevirt_api.resources import KUBEVIRTS, VIRTUAL_MACHINES
from virt_operator.fakes import FakeCluster, kubevirt
from virt_operator.webhook import admit_deletion, webhook_app


def deployed(strategy: str | None) -> dict[str, Any]:
    kv = kubevirt(**({"uninstallStrategy": strategy} if strategy else {}))
    kv["status"] = {"phase": "Deployed"}
    return kv


def vm(cluster: FakeCluster) -> None:
    cluster.put(
        VIRTUAL_MACHINES,
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {"name": "vm", "namespace": "default"},
        },
    )


REQUEST = {"name": "kubevirt", "namespace": "kubevirt", "operation": "DELETE"}


async def test_refused_with_a_vm_present(cluster: FakeCluster) -> None:
    vm(cluster)
    cluster.put(KUBEVIRTS, deployed("BlockUninstallIfWorkloadsExist"))
    why = await admit_deletion(REQUEST, cluster)
    assert why is not None
    assert "Virtual Machines" in why
    assert why.startswith("Rejecting the uninstall request")


@pytest.mark.parametrize("strategy", [None, "RemoveWorkloads"])
async def test_allowed_with_the_default_strategy(
    cluster: FakeCluster, strategy: str | None
) -> None:
    vm(cluster)
    cluster.put(KUBEVIRTS, deployed(strategy))
    assert await admit_deletion(REQUEST, cluster) is None


async def test_allowed_without_workloads(cluster: FakeCluster) -> None:
    cluster.put(KUBEVIRTS, deployed("BlockUninstallIfWorkloadsExist"))
    assert await admit_deletion(REQUEST, cluster) is None


async def test_served_as_an_admission_review(cluster: FakeCluster) -> None:
    vm(cluster)
    cluster.put(KUBEVIRTS, deployed("BlockUninstallIfWorkloadsExist"))
    app = webhook_app(cluster)
    async with TestClient(TestServer(app)) as client:
        answer = await client.post(
            "/kubevirt-validate-delete",
            json={
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {**REQUEST, "uid": "u1"},
            },
        )
        body = await answer.json()
    assert body["response"]["uid"] == "u1"
    assert body["response"]["allowed"] is False
    assert "Virtual Machines" in body["response"]["status"]["message"]
