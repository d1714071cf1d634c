"""`virtctl convert`: manifests to domain XML offline, with clear refusals."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from virt_domain import Domain

if TYPE_CHECKING:
    from conftest import Run

EXAMPLES = Path(__file__).resolve().parents[3] / "compat" / "upstream-kubevirt" / "examples"

#: Examples refused because they need something this cluster does not run, and the
#: field that says so. Every other VM/VMI example must convert.
REFUSED = {
    "vm-cirros-with-sidecar-hook-configmap.yaml": "metadata.annotations[hooks.kubevirt.io/hookSidecars]",
    "vmi-with-sidecar-hook-configmap.yaml": "metadata.annotations[hooks.kubevirt.io/hookSidecars]",
    "vmi-with-sidecar-hook.yaml": "metadata.annotations[hooks.kubevirt.io/hookSidecars]",
    "vmi-dra-pgpu.yaml": "spec.domain.devices.gpus",
    "vmi-gpu.yaml": "spec.domain.devices.gpus",
    "vmi-sriov.yaml": "spec.domain.devices.interfaces[1].sriov",
    "vmi-usb.yaml": "spec.domain.devices.hostDevices",
    # Alone, their instancetypes are missing (test_convert_instancetypes gives them).
    "vm-cirros-clarge-virtio.yaml": "spec.instancetype",
    "vm-cirros-clarge-windows.yaml": "spec.instancetype",
    "vm-cirros-clarge.yaml": "spec.instancetype",
    "vm-cirros-cluster-csmall.yaml": "spec.instancetype",
    "vm-cirros-csmall.yaml": "spec.instancetype",
    "vm-windows-clarge-windows.yaml": "spec.instancetype",
}
_KINDS = (
    "kind: VirtualMachine\n",
    "kind: VirtualMachineInstance\n",
    "kind: VirtualMachinePool\n",
    "kind: VirtualMachineInstanceReplicaSet\n",
)


def _convertible_examples() -> list[str]:
    return sorted(
        p.name for p in EXAMPLES.glob("*.yaml") if any(k in p.read_text() for k in _KINDS)
    )


@pytest.mark.parametrize("name", _convertible_examples())
def test_every_upstream_vm_and_vmi_example_converts_or_is_refused_by_field(
    run: Run, name: str
) -> None:
    result = run("convert", "-f", str(EXAMPLES / name))
    if name in REFUSED:
        assert result.code == 1
        assert result.out == ""
        assert f": {REFUSED[name]}: " in result.err
        return
    assert (result.code, result.err) == (0, "")
    domain = Domain.from_xml(result.out)
    assert domain.name.startswith("default_")
    if name == "vm-pool-cirros.yaml":
        assert domain.name == "default_vm-pool-cirros-0"
    assert domain.to_xml() == result.out.rstrip("\n")
    assert domain.devices.serials, "every example keeps its serial console"


def test_output_is_deterministic(run: Run) -> None:
    path = str(EXAMPLES / "vm-cirros.yaml")
    assert run("convert", "-f", path).out == run("convert", "-f", path).out


def test_emulation_and_namespace(run: Run) -> None:
    result = run(
        "convert", "-f", str(EXAMPLES / "vmi-kernel-boot.yaml"), "--emulation", "-n", "demo"
    )
    assert result.code == 0
    domain = Domain.from_xml(result.out)
    assert (domain.type, domain.name) == ("qemu", "demo_vmi-kernel-boot")
    assert domain.os.kernel is not None
    assert domain.os.kernel.endswith("/boot/vmlinuz-virt")


def test_block_volume_and_container_disk_format(run: Run) -> None:
    pvc = run("convert", "-f", str(EXAMPLES / "vmi-pvc.yaml"), "--block-volume", "pvcdisk")
    assert 'type="block"' in pvc.out
    assert 'dev="/dev/pvcdisk"' in pvc.out
    raw = run(
        "convert",
        "-f",
        str(EXAMPLES / "vmi-ephemeral.yaml"),
        "--container-disk-format",
        "containerdisk=raw",
    )
    assert '<format type="raw"></format>' in raw.out


def test_several_objects_are_labelled(run: Run) -> None:
    result = run(
        "convert", "-f", str(EXAMPLES / "vmi-sata.yaml"), "-f", str(EXAMPLES / "vmi-pvc.yaml")
    )
    assert result.code == 0
    assert result.out.count("<!-- source: ") == 2
    assert result.out.count("<domain ") == 2


BAD_VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: broken}
spec:
  runStrategy: Halted
  template:
    spec:
      domain:
        memory: {guest: 64Mi}
        devices:
          disks:
          - name: root
            disk: {bus: virtio}
"""


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (
            BAD_VM,
            "VirtualMachine/broken: spec.template.spec.domain.devices.disks[0].name: no volume",
        ),
        (
            BAD_VM.replace("bus: virtio", "bus: ide"),
            "VirtualMachine/broken: spec.template.spec.domain.devices.disks[0].disk.bus: ",
        ),
        (
            BAD_VM
            + "      volumes:\n      - name: root\n        containerDisk: {image: x, path: ../../etc/passwd}\n",
            "spec.template.spec.volumes[0].containerDisk.path: ",
        ),
        ("kind: ConfigMap\napiVersion: v1\n", "no VirtualMachine, VirtualMachineInstance"),
        ("a: [b\n", "invalid YAML"),
    ],
)
def test_bad_input_is_one_clear_line(run: Run, manifest: str, expected: str) -> None:
    result = run("convert", "-f", "-", stdin=manifest)
    assert result.code == 1
    assert result.out == ""
    assert expected in result.err


def test_bad_format_option_is_a_usage_error(run: Run) -> None:
    result = run(
        "convert", "-f", str(EXAMPLES / "vmi-sata.yaml"), "--container-disk-format", "x=vmdk"
    )
    assert result.code == 2
    assert "expected VOLUME=raw or VOLUME=qcow2" in result.err


def test_multus_networks_convert_to_the_taps_the_pod_will_have(run: Run) -> None:
    result = run("convert", "-f", str(EXAMPLES / "vmi-multus-multiple-net.yaml"))
    assert (result.code, result.err) == (0, "")
    pod, ptp = Domain.from_xml(result.out).devices.interfaces
    # The pod network's tap0; the secondary network "ptp" is pod interface
    # pode31d7ce2712 in the launcher pod, so its tap is tape31d7ce2712 (upstream's scheme).
    assert [(i.type, i.target.dev if i.target else "") for i in (pod, ptp)] == [
        ("ethernet", "tap0"),
        ("ethernet", "tape31d7ce2712"),
    ]
    assert ptp.target is not None
    assert ptp.target.managed == "no"
    assert ptp.alias is not None
    assert ptp.alias.name == "ua-ptp"
