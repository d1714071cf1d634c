"""Always and RerunOnFailure react to a VMI marked Failed or Succeeded as upstream;
Manual acts only on state change requests (as virt-api writes them)."""

from __future__ import annotations

from typing import Any

from kube_runtime import VIRTUAL_MACHINE_INSTANCES, VIRTUAL_MACHINES, KubeClient


def vm_body(name: str, namespace: str, run_strategy: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runStrategy": run_strategy,
            "template": {
                "spec": {
                    "domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}},
                    "terminationGracePeriodSeconds": 0,
                }
            },
        },
    }


class Vm:
    def __init__(self, client: KubeClient, namespace: str, name: str, kv: Any) -> None:
        self.client, self.namespace, self.name, self.kv = client, namespace, name, kv

    async def vmi(self) -> Any:
        return await self.kv.get_or_none(
            self.client, VIRTUAL_MACHINE_INSTANCES, self.name, self.namespace
        )

    async def status(self) -> dict[str, Any]:
        vm = await self.client.get(VIRTUAL_MACHINES, self.name, self.namespace)
        return dict(vm.get("status") or {})

    async def scheduled_vmi(self, other_than: str = "", within: float = 60.0) -> dict[str, Any]:
        async def probe() -> Any:
            vmi = await self.vmi()
            if vmi is None or vmi["metadata"]["uid"] == other_than:
                return None
            return vmi if (vmi.get("status") or {}).get("phase") == "Scheduled" else None

        result: dict[str, Any] = await self.kv.eventually(
            probe, within=within, what=f"a new Scheduled VMI for {self.name}"
        )
        return result

    async def mark(self, vmi: dict[str, Any], phase: str) -> None:
        # What virt-handler would write when the guest ends (VMIs have no status subresource).
        await self.client.merge_patch(
            VIRTUAL_MACHINE_INSTANCES,
            self.name,
            {"status": {"phase": phase}},
            self.namespace,
        )

    async def printable(self, value: str) -> dict[str, Any]:
        async def probe() -> Any:
            status = await self.status()
            return status if status.get("printableStatus") == value else None

        result: dict[str, Any] = await self.kv.eventually(
            probe, what=f"{self.name} printableStatus {value}"
        )
        return result


async def test_always_restarts_after_success_at_once_and_after_failure_with_backoff(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.create(VIRTUAL_MACHINES, vm_body("always", namespace, "Always"))
    vm = Vm(client, namespace, "always", kv)
    first = await vm.scheduled_vmi()
    await vm.mark(first, "Succeeded")
    second = await vm.scheduled_vmi(other_than=first["metadata"]["uid"])
    assert "startFailure" not in await vm.status()
    await vm.mark(second, "Failed")
    status = await vm.printable("CrashLoopBackOff")
    assert status["startFailure"]["consecutiveFailCount"] == 1
    assert status["startFailure"]["lastFailedVMIUID"] == second["metadata"]["uid"]
    third = await vm.scheduled_vmi(other_than=second["metadata"]["uid"])
    assert third["metadata"]["uid"] != first["metadata"]["uid"]


async def test_rerun_on_failure_restarts_failed_but_not_succeeded(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.create(VIRTUAL_MACHINES, vm_body("rerun", namespace, "RerunOnFailure"))
    vm = Vm(client, namespace, "rerun", kv)
    first = await vm.scheduled_vmi()
    await vm.mark(first, "Failed")
    second = await vm.scheduled_vmi(other_than=first["metadata"]["uid"])
    await vm.mark(second, "Succeeded")
    await vm.printable("Stopped")

    async def pod_gone() -> bool:
        return not await kv.launcher_pods(client, namespace)

    await kv.eventually(pod_gone, what="the finished VMI's pod deleted")
    vmi = await vm.vmi()
    assert vmi is not None
    assert vmi["metadata"]["uid"] == second["metadata"]["uid"]
    assert vmi["status"]["phase"] == "Succeeded"


async def test_manual_acts_only_on_state_change_requests(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.create(VIRTUAL_MACHINES, vm_body("manual", namespace, "Manual"))
    vm = Vm(client, namespace, "manual", kv)
    status = await vm.printable("Stopped")
    assert status["created"] is False
    assert await vm.vmi() is None
    # virt-api's start: a Start request on the VM's status.
    await client.json_patch(
        VIRTUAL_MACHINES,
        "manual",
        [{"op": "add", "path": "/status/stateChangeRequests", "value": [{"action": "Start"}]}],
        namespace,
        subresource="status",
    )
    vmi = await vm.scheduled_vmi()
    status = await vm.status()
    assert not status.get("stateChangeRequests")
    # A finished VMI stays: Manual does not restart it.
    await vm.mark(vmi, "Failed")

    async def pod_gone() -> bool:
        return not await kv.launcher_pods(client, namespace)

    await kv.eventually(pod_gone, what="the failed VMI's pod deleted")
    await vm.printable("Stopped")
    still = await vm.vmi()
    assert still is not None
    assert still["metadata"]["uid"] == vmi["metadata"]["uid"]
    # virt-api's restart of a finished VMI: Stop(uid) then Start.
    await client.json_patch(
        VIRTUAL_MACHINES,
        "manual",
        [
            {
                "op": "add",
                "path": "/status/stateChangeRequests",
                "value": [{"action": "Stop", "uid": vmi["metadata"]["uid"]}, {"action": "Start"}],
            }
        ],
        namespace,
        subresource="status",
    )
    again = await vm.scheduled_vmi(other_than=vmi["metadata"]["uid"])
    # virt-api's stop.
    await client.json_patch(
        VIRTUAL_MACHINES,
        "manual",
        [
            {
                "op": "add",
                "path": "/status/stateChangeRequests",
                "value": [{"action": "Stop", "uid": again["metadata"]["uid"]}],
            }
        ],
        namespace,
        subresource="status",
    )

    async def stopped() -> bool:
        return await vm.vmi() is None and not await kv.launcher_pods(client, namespace)

    await kv.eventually(stopped, what="VMI and pod gone after Stop")
    assert not (await vm.status()).get("stateChangeRequests")


async def test_once_runs_a_single_time(
    client: KubeClient, namespace: str, controller: Any, kv: Any
) -> None:
    await client.create(VIRTUAL_MACHINES, vm_body("once", namespace, "Once"))
    vm = Vm(client, namespace, "once", kv)
    first = await vm.scheduled_vmi()
    await vm.mark(first, "Failed")

    async def pod_gone() -> bool:
        return not await kv.launcher_pods(client, namespace)

    await kv.eventually(pod_gone, what="the finished VMI's pod deleted")
    status = await vm.printable("Stopped")
    assert "startFailure" not in status
    vmi = await vm.vmi()
    assert vmi is not None
    assert vmi["metadata"]["uid"] == first["metadata"]["uid"]
