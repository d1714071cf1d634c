"""The launcher pod's memory overhead follows upstream's estimate term by term."""

from __future__ import annotations

from typing import Any

from kubevirt_api import VirtualMachineInstance, load
from virt_controller.overhead import MiB, memory_overhead, vcpu_count

BASE = 220 * MiB + 8 * MiB + 8 * MiB  # processes, one vCPU, the IO thread


def vmi(domain: dict[str, Any], **spec: Any) -> VirtualMachineInstance:
    body = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "v", "namespace": "ns", "uid": "u"},
        "spec": {"domain": {"devices": {}, **domain}, **spec},
    }
    return load(VirtualMachineInstance, body)


def test_one_gib_guest_costs_270_mib() -> None:
    # 1Gi/512 = 2Mi of page tables, 32Mi of video RAM on top of the base.
    v = vmi({"resources": {"requests": {"memory": "1Gi"}}})
    assert memory_overhead(v) == BASE + 2 * MiB + 32 * MiB == 270 * MiB


def test_no_graphics_drops_video_ram() -> None:
    v = vmi(
        {
            "resources": {"requests": {"memory": "1Gi"}},
            "devices": {"autoattachGraphicsDevice": False},
        }
    )
    assert memory_overhead(v) == 238 * MiB


def test_every_vcpu_adds_8_mib() -> None:
    v = vmi({"resources": {"requests": {"memory": "1Gi"}}, "cpu": {"sockets": 2, "cores": 2}})
    assert vcpu_count(v) == 4
    assert memory_overhead(v) == 270 * MiB + 3 * 8 * MiB


def test_cpu_limit_counts_vcpus_without_topology() -> None:
    v = vmi({"resources": {"limits": {"cpu": "3"}}})
    assert vcpu_count(v) == 3


def test_exec_probes_tpm_and_guaranteed_qos_add_their_shares() -> None:
    probe = {"exec": {"command": ["true"]}}
    v = vmi(
        {
            "resources": {
                "requests": {"memory": "1Gi", "cpu": "1"},
                "limits": {"memory": "1Gi", "cpu": "1"},
            },
            "devices": {"tpm": {}},
        },
        livenessProbe=probe,
        readinessProbe=probe,
    )
    extra = 2 * 10 * MiB + 100 * MiB + 53 * MiB + 100 * MiB
    assert memory_overhead(v) == 270 * MiB + extra


def test_additional_ratio_scales_the_total() -> None:
    v = vmi({"resources": {"requests": {"memory": "1Gi"}}})
    plain = memory_overhead(v)
    doubled = memory_overhead(v, ratio="2")
    assert plain * 2 <= doubled <= plain * 2 + 1000
    assert memory_overhead(v, ratio="not-a-number") == plain


def test_arm64_adds_pflash() -> None:
    v = vmi({"resources": {"requests": {"memory": "1Gi"}}})
    assert memory_overhead(v, architecture="arm64") == 270 * MiB + 128 * MiB
