"""Typed decoding through kubevirt_api models, and service_kit's registry as the metrics seam."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_runtime import ManualClock, SharedInformer, WorkQueue, freeze, model_decoder
from kube_runtime.fakes import FakeListWatch
from kubevirt_api import InvalidObjectError, VirtualMachineInstance
from service_kit.metrics import MetricsRegistry

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "compat" / "upstream-kubevirt" / "examples" / "vmi-alpine-efi.yaml"


def test_model_decoder_builds_a_typed_vmi_from_a_frozen_cached_object() -> None:
    raw = yaml.safe_load(EXAMPLE.read_text())
    vmi = model_decoder(VirtualMachineInstance)(freeze(raw))
    assert isinstance(vmi, VirtualMachineInstance)
    assert vmi.metadata is not None
    assert vmi.metadata.name == raw["metadata"]["name"]


def test_a_malformed_object_fails_with_field_paths() -> None:
    bad = freeze(
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": "x"},
            "spec": {"domain": {"devices": {"disks": 5}}},
        }
    )
    with pytest.raises(InvalidObjectError, match=r"spec\.domain\.devices\.disks"):
        model_decoder(VirtualMachineInstance)(bad)


async def test_informer_events_decode_to_vmis() -> None:
    raw: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    source = FakeListWatch(kind="VirtualMachineInstance", api_version="kubevirt.io/v1")
    source.put({**raw, "metadata": {**raw["metadata"], "namespace": "default"}})
    informer: SharedInformer[VirtualMachineInstance] = SharedInformer(
        source, decode=model_decoder(VirtualMachineInstance), clock=ManualClock()
    )
    stop = asyncio.Event()
    task = asyncio.ensure_future(informer.run(stop))
    assert await informer.wait_for_sync(1)
    [vmi] = informer.objects()
    assert vmi.spec is not None
    assert vmi.metadata is not None
    assert vmi.metadata.namespace == "default"
    stop.set()
    await task


async def test_service_kit_registry_serves_the_kubevirt_workqueue_series() -> None:
    registry = MetricsRegistry()
    queue: WorkQueue[str] = WorkQueue("vmi", clock=ManualClock(), metrics=registry)
    queue.add("a")
    body, _ = registry.render()
    assert b'kubevirt_workqueue_depth{name="vmi"} 1' in body
    assert b"kubevirt_workqueue_adds_total" in body
