"""What operators see: ErrorUnschedulable, and KubeVirt's metric names on /metrics."""

from __future__ import annotations

import asyncio
import urllib.request
from typing import Any

from kube_runtime import VIRTUAL_MACHINE_INSTANCES, VIRTUAL_MACHINES, KubeClient


def vm(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runStrategy": "Always",
            "template": {
                "spec": {
                    "domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}},
                    **spec,
                }
            },
        },
    }


async def test_unschedulable_vm_shows_error_unschedulable(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.create(VIRTUAL_MACHINES, vm("nowhere", namespace, nodeSelector={"no": "such"}))

    async def printable() -> Any:
        status = (await client.get(VIRTUAL_MACHINES, "nowhere", namespace)).get("status") or {}
        return status if status.get("printableStatus") == "ErrorUnschedulable" else None

    await kv.eventually(printable, what="printableStatus ErrorUnschedulable")
    vmi = await client.get(VIRTUAL_MACHINE_INSTANCES, "nowhere", namespace)
    (cond,) = [c for c in vmi["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert vmi["status"]["phase"] == "Scheduling"


async def test_metrics_carry_kubevirt_names(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.create(VIRTUAL_MACHINES, vm("counted", namespace))

    async def scheduled() -> bool:
        vmi = await kv.get_or_none(client, VIRTUAL_MACHINE_INSTANCES, "counted", namespace)
        return bool(vmi and (vmi.get("status") or {}).get("phase") == "Scheduled")

    await kv.eventually(scheduled, what="VMI Scheduled")

    def scrape() -> str:
        url = f"http://127.0.0.1:{controller.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())

    async def has_info() -> str:
        text = await asyncio.to_thread(scrape)
        wanted = f'name="counted",namespace="{namespace}"'
        return text if wanted in text and 'phase="scheduled"' in text else ""

    text = await kv.eventually(has_info, what="kubevirt_vmi_info for the VMI")
    for name in (
        "kubevirt_vmi_phase_transition_time_from_creation_seconds_bucket",
        "kubevirt_vmi_info",
        "kubevirt_vm_info",
        "kubevirt_workqueue_adds_total",
        "kubevirt_workqueue_depth",
        "kubevirt_rest_client_requests_total",
        "kubevirt_virt_controller_leading_status 1.0",
        "kubevirt_virt_controller_ready_status 1.0",
        f'kubevirt_vm_create_date_timestamp_seconds{{name="counted",namespace="{namespace}"}}',
        "kubevirt_vm_resource_requests{",
        "# TYPE kubevirt_vm_starting_status_last_transition_timestamp_seconds counter",
    ):
        assert name in text, f"{name} missing from /metrics"
    assert 'name="virt-controller-vmi"' in text
