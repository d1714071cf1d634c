"""Custom resources through the same generic path: a typed VM informer, apply and status."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_runtime import (
    VIRTUAL_MACHINES,
    ApiError,
    KubeClient,
    RestListWatch,
    SharedInformer,
    model_decoder,
)
from kubevirt_api import VirtualMachine

EXAMPLES = Path(__file__).resolve().parents[2] / "compat/upstream-kubevirt/examples"


async def test_typed_vm_informer_server_side_apply_and_guarded_status_patch(
    private_cluster: Any,
    private_crds: list[str],
    private_namespace: str,
    clients: Callable[..., Awaitable[KubeClient]],
) -> None:
    assert any(n.endswith("/virtualmachines.kubevirt.io") for n in private_crds)
    ns = private_namespace
    client = await clients(private_cluster.kubeconfig, field_manager="kube-runtime-test")
    informer: SharedInformer[VirtualMachine] = SharedInformer(
        RestListWatch(client, VIRTUAL_MACHINES, namespace=ns),
        decode=model_decoder(VirtualMachine),
    )
    stop = asyncio.Event()
    task = asyncio.ensure_future(informer.run(stop))
    try:
        assert await informer.wait_for_sync(30)
        manifest = yaml.safe_load((EXAMPLES / "vm-cirros.yaml").read_text())
        manifest["metadata"]["namespace"] = ns
        name = manifest["metadata"]["name"]
        applied = await client.apply(VIRTUAL_MACHINES, manifest)
        managers = {m["manager"] for m in applied["metadata"]["managedFields"]}
        assert managers == {"kube-runtime-test"}

        # Status through the status subresource, guarded by the resourceVersion we read.
        rv = applied["metadata"]["resourceVersion"]
        await client.patch_status(
            VIRTUAL_MACHINES, name, {"printableStatus": "Stopped"}, ns, resource_version=rv
        )
        with pytest.raises(ApiError) as stale:
            await client.patch_status(
                VIRTUAL_MACHINES, name, {"printableStatus": "Running"}, ns, resource_version=rv
            )
        assert stale.value.conflict
        # Spec writes through the main resource do not touch status, and vice versa.
        await client.merge_patch(VIRTUAL_MACHINES, name, {"status": {"ready": True}}, ns)

        key = f"{ns}/{name}"
        deadline = time.monotonic() + 20
        while (
            (vm := informer.get(key)) is None or vm.status is None or not vm.status.printable_status
        ):
            assert time.monotonic() < deadline, "the typed VM with its status reaches the cache"
            await asyncio.sleep(0.1)
        assert vm.status.printable_status == "Stopped"
        assert not vm.status.ready, "status is only written through /status"
        assert vm.spec is not None
        assert vm.spec.run_strategy == "Halted"
    finally:
        stop.set()
        await task
