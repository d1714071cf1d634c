"""Every KubeVirt object of upstream's examples validates, given the cluster settings it needs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Run

# The feature gates and permitted devices upstream's GPU/USB/hook examples rely on.
KUBEVIRT_CR = """\
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata: {name: kubevirt, namespace: kubevirt}
spec:
  configuration:
    developerConfiguration:
      featureGates: [Sidecar, GPU, HostDisk, HostDevices]
    permittedHostDevices:
      pciHostDevices:
        - {pciVendorSelector: "10DE:1B38", resourceName: nvidia.com/GP102GL_Tesla_P40}
      usb:
        - resourceName: kubevirt.io/storage
          selectors: [{vendor: "46f4", product: "0001"}]
"""


def test_all_upstream_objects_are_valid(run: Run, repo: Path, tmp_path: Path) -> None:
    cr = tmp_path / "kubevirt.yaml"
    cr.write_text(KUBEVIRT_CR)
    examples = repo / "compat" / "upstream-kubevirt" / "examples"
    result = run("validate", "-f", str(examples), "--kubevirt-cr", str(cr))
    # All but the DataVolume example: DataVolumes need CDI, which kubevirt-py does not run.
    prefix = f"{examples}/vm-alpine-datavolume.yaml: VirtualMachine/vm-alpine-datavolume: "
    lines = result.out.splitlines()
    assert result.code == 1
    assert sorted(line.partition(": DataVolumes need CDI")[0] for line in lines) == [
        prefix + "spec.dataVolumeTemplates[0]",
        prefix + "spec.template.spec.volumes[0].dataVolume",
    ]
    # 44 objects of our kinds; PriorityClass and ResourceClaimTemplate are not ours.
    assert "44 object(s) checked, 1 with problems, 3 of other API groups skipped" in result.err


def test_stock_cluster_refuses_feature_gated_examples(run: Run, repo: Path) -> None:
    result = run("validate", "-f", str(repo / "compat/upstream-kubevirt/examples/vmi-gpu.yaml"))
    assert result.code == 1
    assert "gpus need the GPU feature gate" in result.out
    gated = run(
        "validate",
        "--feature-gates",
        "GPU",
        "-f",
        str(repo / "compat/upstream-kubevirt/examples/vmi-host-disk.yaml"),
    )
    assert "HostDisk feature gate" in gated.out


def test_defaults_run_before_admission(run: Run) -> None:
    # A volume without a disk gets one from virt-api's mutating webhook, so it is valid.
    vmi = (
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: v}\n"
        "spec:\n  domain: {devices: {}, memory: {guest: 128Mi}}\n"
        "  volumes: [{name: root, containerDisk: {image: kubevirt-py/guest-containerdisk:latest}}]\n"
    )
    result = run("validate", "-f", "-", stdin=vmi)
    assert (result.code, result.out) == (0, "")


def test_unusable_kubevirt_cr_is_a_usage_error(run: Run, repo: Path, tmp_path: Path) -> None:
    not_cr = tmp_path / "vm.yaml"
    not_cr.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    result = run("validate", "-f", str(repo / "examples"), "--kubevirt-cr", str(not_cr))
    assert result.code == 2
    assert result.err.strip() == (
        f"virtctl validate: --kubevirt-cr: {not_cr}: no object of kind KubeVirt in it"
    )
