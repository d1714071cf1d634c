"""Instancetypes end to end on the control plane: virt-api's webhooks and expand-spec, and a
virt-controller run by the test. A VM with u1.small and the fedora preference (upstream's
values) starts a VMI shaped as its expansion, pinned by ControllerRevisions named as
upstream; a later edit of the instancetype does not change it, a new instancetype on the
running VM asks for a restart, and a conflicting VM is refused with its field path."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

U1 = {
    "apiVersion": "instancetype.kubevirt.io/v1beta1",
    "kind": "VirtualMachineClusterInstancetype",
    "metadata": {"name": "u1.small", "labels": {"instancetype.kubevirt.io/vendor": "kubevirt.io"}},
    "spec": {"cpu": {"guest": 1}, "memory": {"guest": "2Gi"}},
}
U1_MEDIUM = {
    **U1,
    "metadata": {"name": "u1.medium"},
    "spec": {"cpu": {"guest": 1}, "memory": {"guest": "4Gi"}},
}
FEDORA = {
    "apiVersion": "instancetype.kubevirt.io/v1beta1",
    "kind": "VirtualMachineClusterPreference",
    "metadata": {"name": "fedora", "annotations": {"iconClass": "icon-fedora"}},
    "spec": {
        "annotations": {"vm.kubevirt.io/os": "linux"},
        "devices": {
            "preferredDiskBus": "virtio",
            "preferredInterfaceModel": "virtio",
            "preferredRng": {},
        },
        "features": {"preferredSmm": {}},
        "firmware": {"preferredEfi": {"secureBoot": True}},
        "preferredArchitecture": "amd64",
        "requirements": {"architecture": "amd64", "cpu": {"guest": 1}, "memory": {"guest": "2Gi"}},
    },
}


def vm(name: str, domain: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {
            "runStrategy": "Always",
            "instancetype": {"name": "u1.small"},
            "preference": {"name": "fedora"},
            "template": {
                "spec": {
                    "domain": domain or {"devices": {}},
                    "volumes": [
                        {
                            "name": "containerdisk",
                            "containerDisk": {"image": "quay.io/containerdisks/fedora:41"},
                        }
                    ],
                }
            },
        },
    }


@pytest.fixture
def cluster_objects(kube: Any) -> Iterator[None]:
    """u1.small, u1.medium and fedora, as upstream's common instancetypes define them: the
    ones `kv-cluster up` installed, else made here (and only those removed afterwards)."""
    made: list[tuple[str, str]] = []
    for obj in (U1, U1_MEDIUM, FEDORA):
        kind, name = obj["kind"].lower(), obj["metadata"]["name"]
        if kube.kubectl.run("get", kind, name, check=False).returncode != 0:
            kube.kubectl.run("create", "-f", "-", stdin=json.dumps(obj))
            made.append((kind, name))
    yield
    for kind, name in made:
        kube.kubectl.run("delete", kind, name, "--wait=false", check=False)


@pytest.fixture
def controller(kube: Any, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """virt-controller on the host with the admin kubeconfig (the cluster runs none)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path / "virt-controller.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "virt_controller",
            f"--kubeconfig={kube.kubeconfig}",
            "--bind=127.0.0.1",
            f"--port={port}",
            "--leader-elect=false",
            "--use-emulation=true",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    log.close()
    yield proc
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    print((tmp_path / "virt-controller.log").read_text(errors="replace")[-4000:])


def test_a_vm_with_an_instancetype_and_preference_starts_its_expansion(
    virt_api: Any,
    kube: Any,
    namespace: str,
    apply: Callable[..., Any],
    cluster_objects: None,
    controller: Any,
    wait_for: Callable[..., Any],
    get_json: Callable[..., Any],
    virtctl: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    created = apply(vm("vm1"))
    assert created.returncode == 0, created.stderr
    vmi = wait_for(
        lambda: json.loads(
            kube.kubectl.run("get", "vmi", "vm1", "-n", namespace, "-o", "json", check=False).stdout
            or "null"
        ),
        timeout=60,
        what="the VMI",
    )
    stored = get_json("vm", "vm1", "-n", namespace)
    expanded = virtctl(kube.kubeconfig, "expand", "--vm", "vm1", "-n", namespace, "-o", "json")
    assert expanded.returncode == 0, expanded.stderr
    template = json.loads(expanded.stdout)["spec"]["template"]
    spec = vmi["spec"]
    domain = spec["domain"]
    # The VMI carries what the expansion carries: CPU, memory, preferred devices, firmware.
    for field in ("cpu", "memory", "machine"):
        assert {
            k: v for k, v in domain[field].items() if k in template["spec"]["domain"][field]
        } == (template["spec"]["domain"][field]), field
    assert domain["cpu"]["sockets"] == 1
    assert domain["memory"]["guest"] == "2Gi"
    assert domain["devices"]["disks"] == template["spec"]["domain"]["devices"]["disks"]
    assert domain["devices"]["disks"][0]["disk"]["bus"] == "virtio"
    assert domain["devices"]["interfaces"] == template["spec"]["domain"]["devices"]["interfaces"]
    assert domain["devices"]["rng"] == {}
    assert domain["firmware"]["bootloader"] == template["spec"]["domain"]["firmware"]["bootloader"]
    assert domain["firmware"]["bootloader"] == {"efi": {"secureBoot": True}}
    # The VMI's own defaults then enable the features the preference asked for.
    assert template["spec"]["domain"]["features"] == {"smm": {}}
    assert domain["features"]["smm"] == {"enabled": True}
    assert spec["architecture"] == "amd64"
    annotations = vmi["metadata"]["annotations"]
    assert annotations["kubevirt.io/cluster-instancetype-name"] == "u1.small"
    assert annotations["kubevirt.io/cluster-preference-name"] == "fedora"
    assert annotations["vm.kubevirt.io/os"] == "linux"

    # Revisions with upstream's names, owned by the VM, named in its status.
    itype = get_json("virtualmachineclusterinstancetype", "u1.small")
    pref = get_json("virtualmachineclusterpreference", "fedora")
    names = {
        "instancetypeRef": f"vm1-u1.small-v1beta1-{itype['metadata']['uid']}-{itype['metadata']['generation']}",
        "preferenceRef": f"vm1-fedora-v1beta1-{pref['metadata']['uid']}-{pref['metadata']['generation']}",
    }

    def pinned() -> Any:
        current = get_json("vm", "vm1", "-n", namespace)
        refs = current.get("status") or {}
        found = {
            k: ((refs.get(k) or {}).get("controllerRevisionRef") or {}).get("name") for k in names
        }
        return current if found == names else None

    stored = wait_for(pinned, what="status refs")
    for name in names.values():
        revision = get_json("controllerrevision", name, "-n", namespace)
        assert revision["metadata"]["ownerReferences"][0]["uid"] == stored["metadata"]["uid"]
        assert "labels" not in revision["data"]["metadata"]
    assert (
        get_json("controllerrevision", names["instancetypeRef"], "-n", namespace)["metadata"][
            "labels"
        ]["instancetype.kubevirt.io/object-name"]
        == "u1.small"
    )

    # Editing the instancetype later changes neither the VM's expansion nor its pin (an
    # instancetype of the test's namespace: the cluster's are shared).
    small = {**U1, "kind": "VirtualMachineInstancetype", "metadata": {"name": "small"}}
    assert apply(small).returncode == 0
    pinned_vm = vm("vm5")
    pinned_vm["spec"]["runStrategy"] = "Halted"
    pinned_vm["spec"]["instancetype"] = {"name": "small", "kind": "VirtualMachineInstancetype"}
    assert apply(pinned_vm).returncode == 0

    def vm5_pinned() -> Any:
        refs = get_json("vm", "vm5", "-n", namespace).get("status") or {}
        return (refs.get("instancetypeRef") or {}).get("controllerRevisionRef")

    wait_for(vm5_pinned, what="vm5's revision")
    kube.kubectl.run(
        "patch",
        "virtualmachineinstancetype",
        "small",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"memory": {"guest": "3Gi"}}}),
    )
    again = virtctl(kube.kubeconfig, "expand", "--vm", "vm5", "-n", namespace, "-o", "json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["spec"]["template"]["spec"]["domain"]["memory"] == {
        "guest": "2Gi"
    }

    # A new instancetype on the running VM: RestartRequired, the VMI untouched.
    kube.kubectl.run(
        "patch",
        "vm",
        "vm1",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"instancetype": {"name": "u1.medium"}}}),
    )

    def restart_required() -> Any:
        status = get_json("vm", "vm1", "-n", namespace).get("status") or {}
        conditions = {c["type"]: c for c in status.get("conditions") or ()}
        return conditions.get("RestartRequired")

    condition = wait_for(restart_required, what="RestartRequired")
    assert condition["status"] == "True"
    now = get_json("vmi", "vm1", "-n", namespace)
    assert now["metadata"]["uid"] == vmi["metadata"]["uid"]
    assert now["spec"]["domain"]["memory"]["guest"] == "2Gi"


def test_a_conflicting_vm_is_refused_with_its_field_path(
    virt_api: Any, apply: Callable[..., Any], cluster_objects: None
) -> None:
    refused = apply(vm("vm2", {"devices": {}, "cpu": {"sockets": 2}}))
    assert refused.returncode != 0
    assert (
        "spec.template.spec.domain.cpu.sockets: VM field(s) spec.template.spec.domain.cpu.sockets "
        "conflicts with selected instance type"
    ) in refused.stderr


def test_a_missing_instancetype_is_admitted_and_fails_the_sync(
    virt_api: Any,
    apply: Callable[..., Any],
    namespace: str,
    controller: Any,
    wait_for: Callable[..., Any],
    get_json: Callable[..., Any],
) -> None:
    body = vm("vm3")
    body["spec"]["instancetype"] = {"name": "no-such-type"}
    body["spec"].pop("preference")
    admitted = apply(body)
    assert admitted.returncode == 0, admitted.stderr

    def failure() -> Any:
        status = get_json("vm", "vm3", "-n", namespace).get("status") or {}
        return next((c for c in status.get("conditions") or () if c["type"] == "Failure"), None)

    condition = wait_for(failure, what="the Failure condition")
    assert condition["reason"] == "FailedFindInstancetype"
    assert '"no-such-type" not found' in condition["message"]


def test_convert_reads_the_instancetype_from_the_cluster(
    kube: Any,
    cluster_objects: None,
    tmp_path: Path,
    virtctl: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    manifest = tmp_path / "vm.json"
    manifest.write_text(json.dumps(vm("vm4")))
    offline = virtctl(kube.kubeconfig, "convert", "-f", str(manifest))
    assert offline.returncode == 1
    assert "give it with -f or read it with --cluster" in offline.stderr
    converted = virtctl(kube.kubeconfig, "convert", "--cluster", "-f", str(manifest))
    assert converted.returncode == 0, converted.stderr
    assert '<memory unit="b">2147483648</memory>' in converted.stdout
    assert '<target bus="virtio" dev="vda">' in converted.stdout
