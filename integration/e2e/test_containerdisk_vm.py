"""A VM booting from a containerDisk (a qcow2 inside a scratch image) reaches its marker."""

from __future__ import annotations

from typing import Any


def test_containerdisk_vm_boots_to_its_marker(kubevirt: Any, namespace: str) -> None:
    kubevirt.apply(kubevirt.vm("disky", containerdisk=True), namespace)
    vmi = kubevirt.wait_running("disky", namespace)
    assert vmi["spec"]["volumes"][0]["containerDisk"]["image"].endswith("guest-containerdisk:devel")
    assert kubevirt.marker in kubevirt.console_marker("disky", namespace)
