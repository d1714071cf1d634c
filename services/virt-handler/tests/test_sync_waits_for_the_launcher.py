"""A VMI whose launcher is not ready yet is looked at again soon, on the queue's clock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kube_runtime import Controller, Result

if TYPE_CHECKING:
    from conftest import Node


async def test_no_launcher_pod_yet_requeues_without_touching_the_vmi(node: Node) -> None:
    node.put_vmi(node.vmi_body("Scheduled"))

    assert await node.sync.reconcile(node.key) == Result(requeue_after=0.5)
    assert node.client.patches == []
    assert node.client.events == []


async def test_a_launcher_socket_not_there_yet_is_requeued_on_the_injected_clock(
    node: Node,
) -> None:
    node.put_vmi(node.vmi_body("Scheduled"))
    node.put_pod(node.pod_body("Running"))
    node.sockets_dir()  # the pod's volumes exist, launcher-sock does not yet
    controller = Controller("vmi", node.queue, node.sync.reconcile)

    await controller.process(node.key)

    assert node.queue.delayed == 1
    assert len(node.queue) == 0
    await node.clock.advance(0.4)
    assert len(node.queue) == 0
    await node.clock.advance(0.1)
    assert len(node.queue) == 1  # back after waiting_resync, no real time spent
    assert node.launcher.calls == []
    assert node.client.events == []
    # Only the launcher's image is known so far: no write of its own (it rides along
    # with the Running one); the phase stays Scheduled.
    assert node.client.status_patches() == []


async def test_the_launcher_socket_appearing_later_is_picked_up(node: Node) -> None:
    node.put_vmi(node.vmi_body("Scheduled"))
    node.put_pod(node.pod_body("Running"))
    node.sockets_dir()
    await node.sync.reconcile(node.key)
    assert node.launcher.calls == []

    await node.start_launcher()
    await node.sync.reconcile(node.key)

    assert node.launcher.calls == ["GetDomain", "SyncVirtualMachine"]
