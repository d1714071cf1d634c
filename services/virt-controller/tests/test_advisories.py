"""Upstream advisory classes, seen from virt-controller (docs/security.md has the table).

hostDisk (GHSA-46xp-26xh-hpqh's class): the launcher pod gets exactly the image's own
directory from the host, and a path that climbs out of it is refused before any pod is
rendered; nothing in kubevirt-py creates or chowns a hostDisk file (the launcher refuses
a symlinked one, virt-launcher's test_advisories.py). A fake launcher pod is in
test_controllers.py (test_a_labelled_pod_without_owner_reference_is_not_the_vmis).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubevirt_api import VirtualMachineInstance, load
from virt_controller.config import ControllerConfig
from virt_controller.launcher_pod import RenderError, render_launcher_pod


def with_host_disk(path: str) -> VirtualMachineInstance:
    body: dict[str, Any] = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm", "namespace": "ns", "uid": "uid-1"},
        "spec": {
            "domain": {"devices": {}, "resources": {"requests": {"memory": "64Mi"}}},
            "volumes": [
                {
                    "name": "host",
                    "hostDisk": {"path": path, "type": "DiskOrCreate", "capacity": "1Gi"},
                }
            ],
        },
    }
    return load(VirtualMachineInstance, body)


def test_a_host_disk_mounts_only_its_own_directory() -> None:
    pod = render_launcher_pod(with_host_disk("/data/vm/disk.img"), ControllerConfig())

    host_paths = [v["hostPath"] for v in pod["spec"]["volumes"] if "hostPath" in v]
    assert host_paths == [{"path": "/data/vm", "type": "DirectoryOrCreate"}]


@pytest.mark.parametrize("path", ["/data/../etc/disk.img", "/data/./disk.img", "data/disk.img"])
def test_a_host_disk_path_out_of_its_directory_is_refused(path: str) -> None:
    with pytest.raises(RenderError, match=r"spec\.volumes\[0\]\.hostDisk\.path"):
        render_launcher_pod(with_host_disk(path), ControllerConfig())
