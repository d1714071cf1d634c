"""Bad objects are refused with exit 1 and one `<file>: <Kind>/<name>: <path>: <msg>` line each."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Run

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: testvm
spec:
  runStrategy: {run_strategy}
  template:
    spec:
      domain:
        cpu:
          cores: {cores}
        devices:
          disks: {disks}
        resources:
          requests:
            memory: {memory}
      volumes:
        - name: rootdisk
          containerDisk:
            image: kubevirt-py/guest-containerdisk:latest
"""

GOOD = {
    "run_strategy": "Always",
    "cores": "1",
    "memory": "128Mi",
    "disks": "[{name: rootdisk, disk: {bus: virtio}}]",
}


def write_vm(tmp_path: Path, **changes: str) -> Path:
    path = tmp_path / "vm.yaml"
    path.write_text(VM.format(**(GOOD | changes)))
    return path


def test_the_good_vm_is_valid(run: Run, tmp_path: Path) -> None:
    result = run("validate", "-f", str(write_vm(tmp_path)))
    assert (result.code, result.out) == (0, "")
    assert "1 object(s) checked, 0 with problems" in result.err


@pytest.mark.parametrize(
    ("change", "path", "says"),
    [
        ({"run_strategy": "Sometimes"}, "spec.runStrategy", "valid values: 'Always'"),
        ({"memory": "1Gx"}, "spec.template.spec.domain.resources.requests.memory", "1Gx"),
        ({"cores": "-1"}, "spec.template.spec.domain.cpu.cores", "greater than or equal to 0"),
        ({"cores": "two"}, "spec.template.spec.domain.cpu.cores", "expected"),
        (
            {"disks": "[{name: rootdisk, disk: [virtio]}]"},
            "spec.template.spec.domain.devices.disks[0].disk",
            "expected an object",
        ),
    ],
)
def test_bad_field_is_named_with_its_path(
    run: Run, tmp_path: Path, change: dict[str, str], path: str, says: str
) -> None:
    file = write_vm(tmp_path, **change)
    result = run("validate", "-f", str(file))
    assert result.code == 1
    [line] = result.lines
    assert line.startswith(f"{file}: VirtualMachine/testvm: {path}: ")
    assert says in line


def test_admission_rule_violation_is_reported(run: Run, tmp_path: Path) -> None:
    # Schema-valid, but the disk refers to no volume: virt-api would deny it.
    file = write_vm(tmp_path, disks="[{name: rootdisk, disk: {bus: virtio}}, {name: ghost}]")
    result = run("validate", "-f", str(file))
    assert result.code == 1
    assert any(
        line.startswith(
            f"{file}: VirtualMachine/testvm: spec.template.spec.domain.devices.disks[1]"
        )
        for line in result.lines
    ), result.out


def test_misspelt_field_is_refused_not_dropped(run: Run, tmp_path: Path) -> None:
    file = tmp_path / "vm.yaml"
    file.write_text(VM.format(**GOOD).replace("runStrategy:", "runStrategey:"))
    result = run("validate", "-f", str(file))
    assert result.code == 1
    assert result.lines == [
        f"{file}: VirtualMachine/testvm: spec.runStrategey: unknown field; known fields here: "
        "dataVolumeTemplates, instancetype, preference, runStrategy, running, template, "
        "updateVolumesStrategy"
    ]


def test_every_problem_of_every_object_gets_a_line(run: Run, tmp_path: Path) -> None:
    bad_vm = VM.format(**(GOOD | {"run_strategy": "Sometimes"}))
    bad_vmi = (
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\n"
        "metadata: {name: vmi1}\nspec: {domain: {devices: {}, cpu: {sockets: -2, threads: -1}}}\n"
    )
    file = tmp_path / "many.yaml"
    file.write_text(bad_vm + "---\n" + bad_vmi)
    result = run("validate", "-f", str(file))
    assert result.code == 1
    assert result.lines == [
        f"{file}: VirtualMachine/testvm: spec.runStrategy: "
        + result.lines[0].split("spec.runStrategy: ", 1)[1],
        f"{file}: VirtualMachineInstance/vmi1: spec.domain.cpu.sockets: "
        + result.lines[1].split("sockets: ", 1)[1],
        f"{file}: VirtualMachineInstance/vmi1: spec.domain.cpu.threads: "
        + result.lines[2].split("threads: ", 1)[1],
    ]


def test_non_object_document_is_refused(run: Run, tmp_path: Path) -> None:
    file = tmp_path / "list.yaml"
    file.write_text("- just\n- a list\n")
    result = run("validate", "-f", str(file))
    assert result.code == 1
    assert result.lines == [f"{file}: <document 1>: expected an object, got list"]


def test_unknown_kind_of_our_group_is_refused(run: Run, tmp_path: Path) -> None:
    file = tmp_path / "x.yaml"
    file.write_text("apiVersion: kubevirt.io/v1\nkind: VirtualMagic\nmetadata: {name: m}\n")
    result = run("validate", "-f", str(file))
    assert result.code == 1
    [line] = result.lines
    assert line.startswith(
        f"{file}: VirtualMagic/m: kind: unknown kind kubevirt.io/v1 VirtualMagic"
    )
