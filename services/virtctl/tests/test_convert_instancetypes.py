"""`virtctl convert` expands a VM's instancetype and preference given in the same input,
and refuses what upstream's expansion refuses, naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml
from virt_domain import Domain

if TYPE_CHECKING:
    from conftest import Run

EXAMPLES = Path(__file__).resolve().parents[3] / "compat" / "upstream-kubevirt" / "examples"
#: The upstream examples naming an instancetype, and the objects they name.
NAMED = {
    "vm-cirros-csmall.yaml": ["csmall.yaml"],
    "vm-cirros-cluster-csmall.yaml": ["cluster-csmall.yaml"],
    "vm-cirros-clarge.yaml": ["clarge.yaml"],
    "vm-cirros-clarge-virtio.yaml": ["clarge.yaml", "virtio.yaml"],
    "vm-cirros-clarge-windows.yaml": ["clarge.yaml", "windows.yaml"],
    "vm-windows-clarge-windows.yaml": ["clarge.yaml", "windows.yaml"],
}
MEMORY_CONFLICT = (
    "spec.template.spec.domain.memory.guest: VM field(s) spec.template.spec.domain.memory.guest "
    "conflicts with selected instance type"
)


def _sources(names: list[str]) -> list[str]:
    return [arg for name in names for arg in ("-f", str(EXAMPLES / name))]


@pytest.mark.parametrize("vm", sorted(NAMED))
def test_upstream_examples_conflict_with_their_instancetype_as_upstream_refuses(
    run: Run, vm: str
) -> None:
    # Upstream's generator gives every example template memory.guest 128Mi; upstream's
    # admission and expand-spec refuse it next to an instancetype that sets memory.
    result = run("convert", *_sources([*NAMED[vm], vm]))
    assert result.code == 1
    assert MEMORY_CONFLICT in result.err


@pytest.mark.parametrize("vm", sorted(NAMED))
def test_upstream_examples_convert_once_the_template_leaves_memory_to_the_instancetype(
    run: Run, vm: str, tmp_path: Path
) -> None:
    doc = yaml.safe_load((EXAMPLES / vm).read_text())
    del doc["spec"]["template"]["spec"]["domain"]["memory"]
    fixed = tmp_path / vm
    fixed.write_text(yaml.safe_dump(doc))
    result = run("convert", *_sources(NAMED[vm]), "-f", str(fixed))
    assert (result.code, result.err) == (0, "")
    domain = Domain.from_xml(result.out)
    large = "clarge" in vm
    assert domain.memory.value == (2 if large else 128 / 1024) * 1024**3
    assert domain.vcpu is not None
    assert domain.vcpu.count == (4 if large else 1)


def test_a_preference_shapes_the_devices(run: Run, tmp_path: Path) -> None:
    doc = yaml.safe_load((EXAMPLES / "vm-cirros-clarge-virtio.yaml").read_text())
    del doc["spec"]["template"]["spec"]["domain"]["memory"]
    fixed = tmp_path / "vm.yaml"
    fixed.write_text(yaml.safe_dump(doc))
    result = run("convert", *_sources(["clarge.yaml", "virtio.yaml"]), "-f", str(fixed))
    assert result.code == 0, result.err
    assert '<target bus="virtio" dev="vda">' in result.out
    assert '<model type="virtio-non-transitional">' in result.out


def test_a_missing_instancetype_is_named_with_the_way_to_give_it(run: Run) -> None:
    result = run("convert", "-f", str(EXAMPLES / "vm-cirros-csmall.yaml"))
    assert result.code == 1
    assert result.out == ""
    assert (
        'spec.instancetype: virtualmachineinstancetypes.instancetype.kubevirt.io "csmall" not '
        "found; give it with -f or read it with --cluster"
    ) in result.err
