"""Every upstream example of our kinds that needs no absent component is admitted with defaults."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "compat" / "upstream-kubevirt" / "examples"
OURS = {"kubevirt.io", "pool.kubevirt.io", "instancetype.kubevirt.io", "migrations.kubevirt.io"}
# Examples that need something this cluster does not have (not admission's business).
ABSENT = {
    "vmi-dra-pgpu.yaml": "a DRA ResourceClaimTemplate and a GPU driver",
    "vmi-gpu.yaml": "a GPU device plugin (permittedHostDevices)",
    "vmi-usb.yaml": "a USB host device (permittedHostDevices)",
    "migration-job.yaml": "a running VMI to migrate (virt-handler and a node)",
}
# Upstream's generator gives these templates memory.guest beside an instancetype that sets
# memory (their instancetypes are admitted first): upstream's admission refuses them so.
CONFLICTING = {
    name: "spec.template.spec.domain.memory.guest"
    for name in (
        "vm-cirros-clarge-virtio.yaml",
        "vm-cirros-clarge-windows.yaml",
        "vm-cirros-clarge.yaml",
        "vm-cirros-cluster-csmall.yaml",
        "vm-cirros-csmall.yaml",
        "vm-windows-clarge-windows.yaml",
    )
}
# DataVolumes need CDI, which kubevirt-py does not install: refused at admission, naming
# the fields, while the cluster has no DataVolume CRD.
NEEDS_CDI = {
    "vm-alpine-datavolume.yaml": (
        "spec.template.spec.volumes[0].dataVolume",
        "spec.dataVolumeTemplates[0]",
    ),
}
# Gated features some examples use; enabled through a KubeVirt CR as a user would.
GATES = ["HostDisk", "Sidecar"]
# Kinds that would start guests: admitted with a server-side dry run (both webhooks run,
# the defaulted object comes back, nothing is stored), so this admission test does not
# put three dozen launcher pods on the node (load ≈ 10 on two cores made virt-api miss the
# apiserver's 10 s webhook timeout). What the workloads reference is created for real.
WORKLOADS = {
    "VirtualMachine",
    "VirtualMachineInstance",
    "VirtualMachineInstanceReplicaSet",
    "VirtualMachinePool",
}


def examples() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("apiVersion", "").rpartition("/")[0] in OURS:
                found.append((path.name, doc))
    return found


@pytest.fixture
def feature_gates(kube: Any, namespace: str) -> Iterator[None]:
    """Enable GATES in the KubeVirt CR virt-api reads (kubevirt/kubevirt), then restore it."""
    found = kube.kubectl.run(
        "get", "kubevirt", "kubevirt", "-n", "kubevirt", "-o", "json", check=False
    )
    if found.returncode != 0:
        kubevirt = {
            "apiVersion": "kubevirt.io/v1",
            "kind": "KubeVirt",
            "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
            "spec": {"configuration": {"developerConfiguration": {"featureGates": GATES}}},
        }
        kube.kubectl.run("create", "-f", "-", stdin=json.dumps(kubevirt))
        yield
        kube.kubectl.run(
            "delete", "kubevirt", "kubevirt", "-n", "kubevirt", "--wait=false", check=False
        )
        return
    developer = (
        json.loads(found.stdout)["spec"].get("configuration", {}).get("developerConfiguration", {})
    )
    before = developer.get("featureGates")
    wanted = sorted(set(before or []) | set(GATES))

    def set_gates(gates: object) -> None:
        patch = {"spec": {"configuration": {"developerConfiguration": {"featureGates": gates}}}}
        kube.kubectl.run(
            "patch",
            "kubevirt",
            "kubevirt",
            "-n",
            "kubevirt",
            "--type=merge",
            "-p",
            json.dumps(patch),
        )

    set_gates(wanted)
    yield
    set_gates(before)


def test_examples_are_admitted_with_defaults(
    virt_api: Any,
    kube: Any,
    namespace: str,
    apply: Callable[..., Any],
    feature_gates: None,
    wait_for: Callable[..., Any],
) -> None:
    admitted: list[str] = []
    cluster_scoped: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    # Cluster-scoped examples get the namespace in their name; the VMs naming them follow.
    renamed: dict[str, str] = {}
    for filename, doc in examples():
        if filename in ABSENT or doc["kind"] == "KubeVirt":
            continue
        doc = json.loads(json.dumps(doc))
        # Two examples may share a name (vmi-fedora, vmi-fedora-isolated): the second would
        # be an update of the first's VMI spec, which only KubeVirt's components may make.
        if (doc["kind"], doc["metadata"]["name"]) in seen:
            doc["metadata"]["name"] = f"{doc['metadata']['name']}-{len(seen)}"
        seen.add((doc["kind"], doc["metadata"]["name"]))
        cluster_kind = doc["kind"].startswith("VirtualMachineCluster")
        if cluster_kind:
            renamed[doc["metadata"]["name"]] = f"{doc['metadata']['name']}-{namespace}"[:63]
            doc["metadata"]["name"] = renamed[doc["metadata"]["name"]]
            cluster_scoped.append((doc["kind"].lower(), doc["metadata"]["name"]))
        for matcher in ("instancetype", "preference"):
            named = (
                (doc.get("spec") or {}).get(matcher) if doc["kind"] == "VirtualMachine" else None
            )
            if named and "Cluster" in named.get("kind", "Cluster"):
                named["name"] = renamed.get(named["name"], named["name"])
        dry_run = doc["kind"] in WORKLOADS
        if filename in CONFLICTING:
            refused = apply(doc, ns=namespace, dry_run=dry_run)
            assert refused.returncode != 0, filename
            field = CONFLICTING[filename]
            assert f"{field}: VM field(s) {field} conflicts with selected instance type" in (
                refused.stderr
            ), refused.stderr
            continue
        if filename in NEEDS_CDI:
            refused = apply(doc, ns=namespace, dry_run=dry_run)
            assert refused.returncode != 0, filename
            for field in NEEDS_CDI[filename]:
                assert f"{field}: DataVolumes need CDI" in refused.stderr, refused.stderr
            continue
        # The KubeVirt CR is read within ~2 s; retry until the gates are seen.
        outcome: list[Any] = []

        def admitted_now(
            d: dict[str, Any] = doc,
            c: bool = cluster_kind,
            dry: bool = dry_run,
            out: list[Any] = outcome,
        ) -> bool:
            out.append(apply(d, ns=None if c else namespace, dry_run=dry))
            return bool(out[-1].returncode == 0)

        try:
            wait_for(admitted_now, timeout=20, what=f"{filename} to be admitted")
        except AssertionError:
            pytest.fail(f"{filename}: {outcome[-1].stderr}")
        admitted.append(f"{filename}:{doc['kind']}")
        if dry_run:
            stored = json.loads(outcome[-1].stdout)
        else:
            kind = doc["kind"].lower()
            args = [kind, doc["metadata"]["name"]] + ([] if cluster_kind else ["-n", namespace])
            stored = json.loads(kube.kubectl.run("get", *args, "-o", "json").stdout)
        if doc["kind"] == "VirtualMachineInstance":
            domain = stored["spec"]["domain"]
            assert domain["machine"]["type"] == "q35", filename
            assert stored["spec"]["architecture"] == "amd64", filename
            assert domain["firmware"]["uuid"], filename
            assert "currentCPUTopology" in stored["status"], filename
            for disk in domain["devices"].get("disks", []):
                target = next(t for t in ("disk", "cdrom", "lun") if t in disk)
                assert "bus" in disk[target], f"{filename}: {disk}"
        if doc["kind"] == "VirtualMachine":
            assert "runStrategy" in stored["spec"] or "running" in stored["spec"], filename
            assert stored["spec"]["template"]["spec"]["domain"]["machine"]["type"] == "q35", (
                filename
            )
    for kind, name in cluster_scoped:
        kube.kubectl.run("delete", kind, name, "--wait=false", check=False)
    assert len(admitted) >= 33, admitted  # every example but those set aside above
