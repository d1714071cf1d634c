"""Final phases: the VMI, migration and pod phases that never change again."""

from __future__ import annotations

from kubevirt_api.enums import (
    FINAL_MIGRATION_PHASES,
    FINAL_POD_PHASES,
    FINAL_VMI_PHASES,
    PodPhase,
    VirtualMachineInstanceMigrationPhase,
    VirtualMachineInstancePhase,
)


def test_final_vmi_phases() -> None:
    assert {p for p in VirtualMachineInstancePhase if p in FINAL_VMI_PHASES} == {
        VirtualMachineInstancePhase.SUCCEEDED,
        VirtualMachineInstancePhase.FAILED,
    }
    # Raw status.phase strings compare equal to the members.
    assert "Failed" in FINAL_VMI_PHASES
    assert "Running" not in FINAL_VMI_PHASES
    assert "" not in FINAL_VMI_PHASES


def test_final_migration_and_pod_phases() -> None:
    assert {p for p in VirtualMachineInstanceMigrationPhase if p in FINAL_MIGRATION_PHASES} == {
        VirtualMachineInstanceMigrationPhase.SUCCEEDED,
        VirtualMachineInstanceMigrationPhase.FAILED,
    }
    assert {p for p in PodPhase if p in FINAL_POD_PHASES} == {PodPhase.SUCCEEDED, PodPhase.FAILED}
