"""A readiness endpoint can say which informer has not synced and the API error it got."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kube_runtime import ApiError, ManualClock, SharedInformer, sync_problems
from kube_runtime.fakes import FakeListWatch


@pytest.fixture
async def stop() -> AsyncIterator[asyncio.Event]:
    event = asyncio.Event()
    yield event
    event.set()


async def test_an_informer_whose_list_fails_names_the_error_until_it_syncs(
    stop: asyncio.Event,
) -> None:
    missing = FakeListWatch(kind="VirtualMachine", api_version="kubevirt.io/v1")
    # What the apiserver answers for a resource whose CRD is not installed yet.
    missing.fail_lists.append(ApiError(404, "NotFound", "the server could not find the resource"))
    fine = FakeListWatch()
    clock = ManualClock()
    vms: SharedInformer[object] = SharedInformer(missing, name="virtualmachines/*", clock=clock)
    maps: SharedInformer[object] = SharedInformer(fine, name="configmaps/*", clock=clock)
    assert sync_problems([vms, maps]) == (
        "virtualmachines/*: not synced yet; configmaps/*: not synced yet"
    )
    tasks = [asyncio.ensure_future(i.run(stop)) for i in (vms, maps)]
    assert await maps.wait_for_sync(1)
    for _ in range(100):
        if vms.reflector.stats.errors:
            break
        await asyncio.sleep(0)
    problems = sync_problems([vms, maps])
    assert problems.startswith("virtualmachines/*: not synced (ApiError")
    assert "404" in problems
    assert "could not find the resource" in problems
    assert "configmaps" not in problems
    await clock.advance(60)  # past the back-off: the list is retried and succeeds
    assert await vms.wait_for_sync(1)
    assert sync_problems([vms, maps]) == ""
    stop.set()
    await asyncio.gather(*tasks)
