"""migrate --addedNodeSelector splits on commas; migrate-cancel deletes the VM's unfinished
migration (as upstream); evacuate-cancel clears the evacuation through virt-api."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from virtctl.cli import main

if TYPE_CHECKING:
    from conftest import Routes

MIGRATIONS = "/apis/kubevirt.io/v1/namespaces/team-a/virtualmachineinstancemigrations"
SUBRESOURCES = "/apis/subresources.kubevirt.io/v1/namespaces/team-a"


def test_added_node_selector_splits_on_commas_and_repeats(api: Routes, tmp_path: Path) -> None:
    config = api.kubeconfig(tmp_path)
    argv = ["migrate", "vm1", "--addedNodeSelector", "a=1,b=2", "--addedNodeSelector", "c=3"]
    assert main([*argv, "--kubeconfig", config]) == 0
    (request,) = api.requests
    assert request[1] == f"{SUBRESOURCES}/virtualmachines/vm1/migrate"
    assert request[3] == {"addedNodeSelector": {"a": "1", "b": "2", "c": "3"}}


def test_migrate_cancel_deletes_the_unfinished_migration(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answers[("GET", MIGRATIONS)] = (
        200,
        {
            "items": [
                {"metadata": {"name": "done"}, "status": {"phase": "Succeeded"}},
                {"metadata": {"name": "active"}, "status": {"phase": "Running"}},
            ]
        },
    )
    assert main(["migrate-cancel", "vm1", "--kubeconfig", api.kubeconfig(tmp_path)]) == 0
    listing, deletion = api.requests
    assert listing[2]["labelSelector"] == ["kubevirt.io/vmi-name==vm1"]
    assert deletion[:2] == ("DELETE", f"{MIGRATIONS}/active")
    assert "VM vm1 was scheduled to migrate-cancel" in capsys.readouterr().out


def test_migrate_cancel_without_an_active_migration_says_so(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.answers[("GET", MIGRATIONS)] = (200, {"items": []})
    assert main(["migrate-cancel", "vm1", "--kubeconfig", api.kubeconfig(tmp_path)]) == 1
    assert "Found no migration to cancel for vm1" in capsys.readouterr().err


def test_evacuate_cancel_names_the_node_the_vmi_is_on(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vmi = "/apis/kubevirt.io/v1/namespaces/team-a/virtualmachineinstances/vm1"
    api.answers[("GET", vmi)] = (200, {"status": {"nodeName": "node-a"}})
    argv = ["evacuate-cancel", "vm", "vm1", "--dry-run", "--kubeconfig", api.kubeconfig(tmp_path)]
    assert main(argv) == 0
    put = api.requests[-1]
    assert put[:2] == ("PUT", f"{SUBRESOURCES}/virtualmachines/vm1/evacuate/cancel")
    assert put[3] == {"dryRun": ["All"], "evacuationNodeName": "node-a"}
    assert "VM team-a/vm1 was canceled evacuation" in capsys.readouterr().out
