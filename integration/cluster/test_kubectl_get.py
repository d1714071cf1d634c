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


PLURALS = {
    "virtualmachine.kubevirt.io": "virtualmachines",
    "virtualmachineinstance.kubevirt.io": "virtualmachineinstances",
    "virtualmachineinstancemigration.kubevirt.io": "virtualmachineinstancemigrations",
    "virtualmachineinstancereplicaset.kubevirt.io": "virtualmachineinstancereplicasets",
    "kubevirt.kubevirt.io": "kubevirts",
}
# A migration needs a running VMI once virt-api's webhook is registered, which needs a
# node: its columns are checked through the Table API below instead.
WITHOUT_OBJECT = {"virtualmachineinstancemigration.kubevirt.io"}


def _one_of_each(namespace: str) -> list[dict[str, Any]]:
    kubevirt = {"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt", "metadata": {"name": "kv"}}
    kubevirt["spec"] = {}
    objects = [
        _example("vm-cirros.yaml"),
        _example("vmi-ephemeral.yaml"),
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
    assert set(tables) == set(UPSTREAM_COLUMNS) - WITHOUT_OBJECT
    for kind, (header, _) in tables.items():
        assert header == UPSTREAM_COLUMNS[kind], kind
    listed = {name for _, names in tables.values() for name in names}
    for obj in objects:  # (controllers, when running, may add VMIs of the replica set)
        assert f"{obj['kind'].lower()}.kubevirt.io/{obj['metadata']['name']}" in listed


def test_the_server_renders_upstream_columns_for_every_kind(kube: Any, namespace: str) -> None:
    kube.require_crds()
    api = kube.api()
    as_table = "application/json;as=Table;v=v1;g=meta.k8s.io"
    for kind, plural in PLURALS.items():
        answer = api.request(
            "GET", f"/apis/kubevirt.io/v1/namespaces/{namespace}/{plural}", accept=as_table
        )
        assert answer.status == 200, answer.body
        shown = [c["name"].upper() for c in answer.body["columnDefinitions"] if c["priority"] == 0]
        assert shown == UPSTREAM_COLUMNS[kind], kind


def test_plural_short_names_work_too(kube: Any, kubectl: Kubectl, namespace: str) -> None:
    kube.require_crds()
    out = kubectl.run("get", "vms,vmis,vmims,vmirss,kvs", "-n", namespace)
    assert out.returncode == 0
    assert "No resources found" in out.stderr
