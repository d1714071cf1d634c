"""`kubectl get vm,vmi,vmim,vmirs,kv` answers with upstream's short names and columns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from kv_cluster import Kubectl

EXAMPLES = Path(__file__).resolve().parents[2] / "compat" / "upstream-kubevirt" / "examples"

# Upstream KubeVirt's printer columns (priority 0) after kubectl's NAME column.
UPSTREAM_COLUMNS = {
    "virtualmachine.kubevirt.io": ["NAME", "AGE", "STATUS", "READY"],
    "virtualmachineinstance.kubevirt.io": ["NAME", "AGE", "PHASE", "IP", "NODENAME", "READY"],
    "virtualmachineinstancemigration.kubevirt.io": ["NAME", "PHASE", "VMI"],
    "virtualmachineinstancereplicaset.kubevirt.io": ["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
    "kubevirt.kubevirt.io": ["NAME", "AGE", "PHASE"],
}


def _example(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((EXAMPLES / name).read_text())
    assert isinstance(doc, dict)
    return doc


def _one_of_each(namespace: str) -> list[dict[str, Any]]:
    kubevirt = {"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt", "metadata": {"name": "kv"}}
    kubevirt["spec"] = {}
    objects = [
        _example("vm-cirros.yaml"),
        _example("vmi-ephemeral.yaml"),
        _example("migration-job.yaml"),
        _example("vmi-replicaset-cirros.yaml"),
        kubevirt,
    ]
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
    return objects


def _tables(output: str) -> dict[str, tuple[list[str], list[str]]]:
    """kubectl's multi-kind output: resource prefix -> (header columns, object names)."""
    tables: dict[str, tuple[list[str], list[str]]] = {}
    for block in output.strip().split("\n\n"):
        lines = block.splitlines()
        header, rows = lines[0].split(), [line.split()[0] for line in lines[1:]]
        kind = rows[0].split("/")[0]
        tables[kind] = (header, rows)
    return tables


def test_short_names_list_every_kind_with_upstream_columns(
    kube: Any, kubectl: Kubectl, namespace: str
) -> None:
    kube.require_crds()
    objects = _one_of_each(namespace)
    kubectl.run("create", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in objects))

    out = kubectl.run("get", "vm,vmi,vmim,vmirs,kv", "-n", namespace).stdout
    tables = _tables(out)
    assert set(tables) == set(UPSTREAM_COLUMNS)
    for kind, columns in UPSTREAM_COLUMNS.items():
        header, names = tables[kind]
        assert header == columns, kind
        assert len(names) == 1, kind


def test_plural_short_names_work_too(kube: Any, kubectl: Kubectl, namespace: str) -> None:
    kube.require_crds()
    out = kubectl.run("get", "vms,vmis,vmims,vmirss,kvs", "-n", namespace)
    assert out.returncode == 0
    assert "No resources found" in out.stderr
