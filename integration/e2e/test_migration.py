"""Live migration between the two nodes of the local cluster (`kv-cluster up --nodes 2`).

Upstream's behaviour (UPSTREAM-BEHAVIOUR.md section 2) and its tests
(`tests/migration/migration.go`): a VirtualMachineInstanceMigration moves a running guest
to the other node without a reboot; the VMI keeps Running and ends with `status.nodeName`,
its `kubevirt.io/nodeName` label and `migrationState` naming the target
(`libmigration.ConfirmVMIPostMigration`); deleting the VMIM of a migration still crawling
(a MigrationPolicy of 1Mi/s) aborts it and the guest stays on its node; a VMI whose pod
network uses bridge binding is not live-migratable and its migration is refused.

The guest is the tiny kernel-boot guest with masquerade on the pod network. Its RAM
is its root filesystem, so a file written to /tmp before the move and still there after
it, and a /proc/uptime that kept growing, prove it was not rebooted. Needs two
schedulable nodes, as the e2e session has; the VMs here are not pinned to the first.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kv_cluster.components import ComponentError

MIGRATION_TIMEOUT = 300.0
_UPTIME = re.compile(r"^(\d+\.\d+) \d+\.\d+\s*$", re.MULTILINE)


@pytest.fixture
def nodes(kubevirt: Any) -> list[str]:
    """The cluster's two nodes (the e2e session brings both up, schedulable)."""
    names = list(kubevirt.handlers)
    assert len(names) >= 2, f"a migration needs two nodes, the cluster has {names}"
    return names


def _vm(kubevirt: Any, name: str, *, binding: str = "masquerade", **labels: str) -> dict[str, Any]:
    vm: dict[str, Any] = kubevirt.vm(name, pinned=False, binding=binding)  # free to move
    vm["spec"]["template"]["metadata"]["labels"].update(labels)
    return vm


def _boot(kubevirt: Any, vm: dict[str, Any], namespace: str) -> dict[str, Any]:
    name = vm["metadata"]["name"]
    kubevirt.apply(vm, namespace)
    kubevirt.wait_running(name, namespace, timeout=240)
    kubevirt.console_marker(name, namespace, timeout=180)
    return kubevirt.wait_for(
        f"VMI {name} LiveMigratable judged",
        lambda: _with_condition(kubevirt.get("vmi", name, namespace), "LiveMigratable"),
        60,
    )


def _with_condition(vmi: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for condition in ((vmi or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return vmi
    return None


def _interface_ip(vmi: dict[str, Any] | None) -> str:
    interfaces = ((vmi or {}).get("status") or {}).get("interfaces") or [{}]
    return str(interfaces[0].get("ipAddress") or "")


def _condition(vmi: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [c for c in vmi["status"].get("conditions") or [] if c.get("type") == kind]
    return found[0] if found else {}


def _uptime(kubevirt: Any, name: str, namespace: str) -> float:
    out = kubevirt.in_guest(name, namespace, "cat /proc/uptime")
    readings = _UPTIME.findall(out)
    assert readings, f"no /proc/uptime line in the guest's answer:\n{out}"
    return float(readings[-1])  # the last: this answer's (the console replays the past)


def _start_migration(kubevirt: Any, vmi: str, namespace: str, name: str) -> None:
    kubevirt.apply(
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstanceMigration",
            "metadata": {"name": name},
            "spec": {"vmiName": vmi},
        },
        namespace,
    )


def _vmim_in(kubevirt: Any, name: str, namespace: str, phases: tuple[str, ...]) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        vmim = kubevirt.get("vmim", name, namespace) or {}
        phase = (vmim.get("status") or {}).get("phase")
        if phase in phases:
            return vmim
        assert phase != "Failed", f"migration {name} failed: {json.dumps(vmim.get('status'))}"
        return None

    return kubevirt.wait_for(f"migration {name} {'/'.join(phases)}", reached, MIGRATION_TIMEOUT)


def _launcher_pods(kubevirt: Any, name: str, namespace: str) -> list[dict[str, Any]]:
    pods = json.loads(
        kubevirt.kubectl.run(
            "get", "pods", "-n", namespace, "-l", "kubevirt.io=virt-launcher", "-o", "json"
        ).stdout
    )["items"]
    return [p for p in pods if p["metadata"].get("labels", {}).get("vm.kubevirt.io/name") == name]


def _confirm_post_migration(
    kubevirt: Any, name: str, namespace: str, vmim: dict[str, Any], source: str
) -> dict[str, Any]:
    """upstream's libmigration.ConfirmVMIPostMigration, plus the label and the VMIM's copy."""
    vmi = kubevirt.get("vmi", name, namespace)
    assert vmi is not None
    status = vmi["status"]
    state = status.get("migrationState") or {}
    seen = f"migrationState: {json.dumps(state)}"
    for stamp in ("startTimestamp", "endTimestamp", "targetNodeDomainReadyTimestamp"):
        assert state.get(stamp), f"{stamp} missing; {seen}"
    assert state.get("targetNode") == status.get("nodeName"), f"moved to the target; {seen}"
    assert state.get("sourceNode") == source, seen
    assert state.get("targetNode") != source, f"a different node; {seen}"
    assert state.get("completed") is True, seen
    assert not state.get("failed"), seen
    assert state.get("targetNodeAddress"), seen
    assert state.get("migrationUid") == vmim["metadata"]["uid"], seen
    assert vmi["metadata"]["labels"].get("kubevirt.io/nodeName") == status["nodeName"]
    assert "kubevirt.io/migrationTargetNodeName" not in vmi["metadata"]["labels"]
    assert status.get("phase") == "Running"

    def final_copy() -> dict[str, Any] | None:
        # The controller copies the VMI's migrationState into the final VMIM; it may land
        # just after the phase.
        found = kubevirt.get("vmim", vmim["metadata"]["name"], namespace) or {}
        state = (found.get("status") or {}).get("migrationState") or {}
        return state if state.get("targetNode") else None

    copied = kubevirt.wait_for("the VMIM's copy of the migration state", final_copy, 60)
    assert (copied.get("sourceNode"), copied.get("targetNode")) == (source, status["nodeName"]), (
        f"the VMIM's migrationState names the nodes: {json.dumps(copied)}"
    )
    assert copied.get("startTimestamp"), json.dumps(copied)
    assert copied.get("endTimestamp"), json.dumps(copied)
    return vmi


def test_a_running_vm_moves_to_the_other_node_and_back_without_a_reboot(
    kubevirt: Any, nodes: list[str], namespace: str
) -> None:
    vmi = _boot(kubevirt, _vm(kubevirt, "mover"), namespace)
    migratable = _condition(vmi, "LiveMigratable")
    assert migratable.get("status") == "True", f"masquerade is migratable: {migratable}"
    assert vmi["status"].get("migrationMethod") == "LiveMigration", vmi["status"]
    token = secrets.token_hex(6)
    kubevirt.in_guest("mover", namespace, f"echo {token} > /tmp/kv-migration-marker")
    before = _uptime(kubevirt, "mover", namespace)

    for move in range(2):
        source = vmi["status"]["nodeName"]
        _start_migration(kubevirt, "mover", namespace, f"move-{move}")
        vmim = _vmim_in(kubevirt, f"move-{move}", namespace, ("Succeeded",))
        vmi = _confirm_post_migration(kubevirt, "mover", namespace, vmim, source)
        assert vmi["status"]["nodeName"] == next(n for n in nodes if n != source)

        # The console works through the new node's handler; the guest never rebooted.
        marker = kubevirt.in_guest("mover", namespace, "cat /tmp/kv-migration-marker")
        assert token in marker, f"the guest lost its RAM (rebooted?):\n{marker}"
        now = _uptime(kubevirt, "mover", namespace)
        assert now > before, f"uptime went from {before} to {now}: the guest restarted"
        before = now
        target_pods = [
            p
            for p in _launcher_pods(kubevirt, "mover", namespace)
            if p["spec"].get("nodeName") == vmi["status"]["nodeName"]
            and p["status"].get("phase") == "Running"
        ]
        assert len(target_pods) == 1, [p["metadata"]["name"] for p in target_pods]
        pod_ip = target_pods[0]["status"]["podIP"]
        kubevirt.wait_for(
            "status.interfaces to hold the target pod's IP",
            lambda pod_ip=pod_ip: _interface_ip(kubevirt.get("vmi", "mover", namespace)) == pod_ip,
            60,
        )
        # The source launcher ends with its domain.
        kubevirt.wait_for(
            f"the launcher pod on {source} to finish",
            lambda source=source: all(
                p["status"].get("phase") in ("Succeeded", "Failed")
                for p in _launcher_pods(kubevirt, "mover", namespace)
                if p["spec"].get("nodeName") == source
            ),
            120,
        )


def test_a_vm_with_a_cloud_init_disk_migrates_its_disk_along(
    kubevirt: Any, nodes: list[str], namespace: str
) -> None:
    """upstream's [test_id:1783] with cloud-init: local disks make it a block migration."""
    vm = _vm(kubevirt, "withdisk")
    spec = vm["spec"]["template"]["spec"]
    spec["domain"]["devices"]["disks"] = [{"name": "cloudinit", "disk": {"bus": "virtio"}}]
    spec["volumes"] = [{"name": "cloudinit", "cloudInitNoCloud": {"userData": "#cloud-config\n"}}]
    vmi = _boot(kubevirt, vm, namespace)
    assert vmi["status"].get("migrationMethod") == "BlockMigration", vmi["status"]
    before = _uptime(kubevirt, "withdisk", namespace)
    source = vmi["status"]["nodeName"]
    _start_migration(kubevirt, "withdisk", namespace, "block")
    vmim = _vmim_in(kubevirt, "block", namespace, ("Succeeded",))
    _confirm_post_migration(kubevirt, "withdisk", namespace, vmim, source)
    assert _uptime(kubevirt, "withdisk", namespace) > before


@pytest.fixture
def slow_policy(kubevirt: Any, namespace: str) -> Iterator[str]:
    """A MigrationPolicy that holds migrations of the VMIs labelled with its token to 1Mi/s."""
    token = secrets.token_hex(4)
    name = f"slow-{token}"
    kubevirt.kubectl.run(
        "apply",
        "-f",
        "-",
        stdin=json.dumps(
            {
                "apiVersion": "migrations.kubevirt.io/v1alpha1",
                "kind": "MigrationPolicy",
                "metadata": {"name": name},
                "spec": {
                    "bandwidthPerMigration": "1Mi",
                    "selectors": {"virtualMachineInstanceSelector": {"kubevirt-py.io/slow": token}},
                },
            }
        ),
    )
    try:
        yield token
    finally:
        kubevirt.kubectl.run("delete", "migrationpolicy", name, "--wait=false", check=False)


def test_deleting_a_crawling_migration_aborts_it_and_the_guest_stays(
    kubevirt: Any, nodes: list[str], namespace: str, slow_policy: str
) -> None:
    """upstream's [test_id:3241]: cancel a running migration by deleting its VMIM."""
    vmi = _boot(
        kubevirt, _vm(kubevirt, "crawler", **{"kubevirt-py.io/slow": slow_policy}), namespace
    )
    source = vmi["status"]["nodeName"]
    # 48 MiB of random bytes in the guest's RAM: at 1 MiB/s, minutes to copy.
    kubevirt.in_guest(
        "crawler", namespace, "dd if=/dev/urandom of=/tmp/fill bs=1M count=48 2>/dev/null", 120
    )
    _start_migration(kubevirt, "crawler", namespace, "crawl")
    running = _vmim_in(kubevirt, "crawl", namespace, ("Running",))
    assert running["status"].get("phase") == "Running"
    kubevirt.wait_for(
        "the migration to have started on the source",
        lambda: (
            ((kubevirt.get("vmi", "crawler", namespace) or {}).get("status") or {})
            .get("migrationState", {})
            .get("startTimestamp")
        ),
        120,
    )
    state = kubevirt.get("vmi", "crawler", namespace)["status"]["migrationState"]
    assert state.get("migrationPolicyName", "").startswith("slow-"), json.dumps(state)
    kubevirt.kubectl.run("delete", "vmim", "crawl", "-n", namespace, "--wait=false")

    def aborted() -> dict[str, Any] | None:
        found = (kubevirt.get("vmi", "crawler", namespace) or {}).get("status") or {}
        migration = found.get("migrationState") or {}
        return found if migration.get("completed") and migration.get("endTimestamp") else None

    status = kubevirt.wait_for("the migration to end aborted", aborted, 180)
    state = status["migrationState"]
    assert state.get("abortStatus") == "Succeeded", json.dumps(state)
    assert state.get("failed") is True, json.dumps(state)
    assert "aborted" in state.get("failureReason", ""), json.dumps(state)
    assert status.get("phase") == "Running"
    assert status.get("nodeName") == source, "the guest stays where it was"
    assert _uptime(kubevirt, "crawler", namespace) > 0  # its console still answers
    kubevirt.wait_for(
        "the VMIM to be gone (its finalizer released)",
        lambda: kubevirt.get("vmim", "crawl", namespace) is None,
        120,
    )


def test_a_bridge_bound_vmi_is_not_live_migratable_and_its_migration_is_refused(
    kubevirt: Any, nodes: list[str], namespace: str
) -> None:
    vmi = _boot(kubevirt, _vm(kubevirt, "bridged", binding="bridge"), namespace)
    migratable = _condition(vmi, "LiveMigratable")
    assert (migratable.get("status"), migratable.get("reason")) == (
        "False",
        "InterfaceNotLiveMigratable",
    ), migratable
    refused = kubevirt.kubectl.run(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        stdin=json.dumps(
            {
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachineInstanceMigration",
                "metadata": {"name": "nope"},
                "spec": {"vmiName": "bridged"},
            }
        ),
        check=False,
    )
    assert refused.returncode != 0, "a VMIM for a non-migratable VMI must be refused"
    assert "InterfaceNotLiveMigratable" in refused.stderr, refused.stderr
    assert (
        kubevirt.get("vmi", "bridged", namespace)["status"]["nodeName"] == vmi["status"]["nodeName"]
    )


def _qemus_of(namespace: str, name: str) -> list[int]:
    """The pids of QEMU processes running this VMI's domain (`<namespace>_<name>`)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            cmdline
            and cmdline[0].endswith(b"qemu-system-x86_64")
            and any(arg.startswith(f"guest={namespace}_{name},".encode()) for arg in cmdline)
        ):
            found.append(int(pid))
    return found


def test_a_killed_source_handler_mid_migration_loses_no_guest_and_runs_none_twice(
    kubevirt: Any, nodes: list[str], namespace: str, slow_policy: str
) -> None:
    """kill -9 of the source's virt-handler while a migration crawls: the migration ends
    (failed or done), the guest keeps running, once, without a reboot."""
    vmi = _boot(
        kubevirt, _vm(kubevirt, "survivor", **{"kubevirt-py.io/slow": slow_policy}), namespace
    )
    source = vmi["status"]["nodeName"]
    kubevirt.in_guest(
        "survivor",
        namespace,
        "touch /tmp/before-move; dd if=/dev/urandom of=/tmp/fill bs=1M count=48 2>/dev/null",
        120,
    )
    before = _uptime(kubevirt, "survivor", namespace)
    _start_migration(kubevirt, "survivor", namespace, "interrupted")
    kubevirt.wait_for(
        "the migration to have started on the source",
        lambda: (
            ((kubevirt.get("vmi", "survivor", namespace) or {}).get("status") or {})
            .get("migrationState", {})
            .get("startTimestamp")
        ),
        MIGRATION_TIMEOUT,
    )
    handler = kubevirt.handlers[source]
    record = handler.record()
    assert record is not None, f"no virt-handler on {source}"
    assert record.alive(), f"virt-handler on {source} is not running"
    os.kill(record.pid, signal.SIGKILL)
    with contextlib.suppress(ComponentError):
        handler.ensure()

    def ended() -> dict[str, Any] | None:
        vmim = kubevirt.get("vmim", "interrupted", namespace) or {}
        running = _qemus_of(namespace, "survivor")
        phase = (vmim.get("status") or {}).get("phase")
        # Two QEMUs exist while the target receives; never more.
        assert len(running) <= 2, f"QEMU processes of the guest: {running}"
        return vmim if phase in ("Succeeded", "Failed") else None

    vmim = kubevirt.wait_for("the interrupted migration to end", ended, MIGRATION_TIMEOUT)
    kubevirt.wait_for(
        "one QEMU left for the guest",
        lambda: len(_qemus_of(namespace, "survivor")) == 1 or None,
        MIGRATION_TIMEOUT,
    )
    status = kubevirt.get("vmi", "survivor", namespace)["status"]
    assert status.get("phase") == "Running", json.dumps(status)
    if vmim["status"]["phase"] == "Failed":
        assert status.get("nodeName") == source, "a failed migration leaves the guest where it was"
    out = kubevirt.in_guest("survivor", namespace, "ls /tmp/before-move; cat /proc/uptime")
    assert "No such file" not in out, f"the guest was rebooted:\n{out}"
    # The last uptime line is this answer's (a long typed line can wrap, and the console
    # replays what came before).
    readings = _UPTIME.findall(out)
    assert readings, out
    assert float(readings[-1]) > before, out


def _kubevirt_pods(kubevirt: Any) -> list[dict[str, Any]]:
    """KubeVirt's own pods (namespace kubevirt); none when it runs as host processes."""
    found = kubevirt.kubectl.run("get", "pods", "-n", "kubevirt", "-o", "json", check=False)
    return json.loads(found.stdout)["items"] if found.returncode == 0 else []


def _component(pod: dict[str, Any]) -> str:
    return str(pod["metadata"].get("labels", {}).get("kubevirt.io", ""))


def _ready(pod: dict[str, Any]) -> bool:
    return pod["status"].get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod["status"].get("conditions") or []
    )


@pytest.fixture
def uncordon(kubevirt: Any) -> Iterator[list[str]]:
    """Nodes a test drains; each is made schedulable again afterwards, whatever happened."""
    drained: list[str] = []
    yield drained
    for node in drained:
        kubevirt.kubectl.run("uncordon", node, check=False)


def test_kubectl_drain_live_migrates_the_vm_away_and_evicts_only_what_upstream_does(
    kubevirt: Any, nodes: list[str], namespace: str, uncordon: list[str]
) -> None:
    """`kubectl drain` of a VM's node: the VM (evictionStrategy LiveMigrate) moves to the
    other node without a reboot, as upstream's "[test_id:2221] should migrate a VMI under
    load to another node" drain tests (tests/migration/eviction_strategy.go).

    The launcher pod's eviction is refused with 429 by virt-api's eviction webhook, which
    marks the VMI (`evacuationNodeName`); virt-controller's evacuation controller creates
    the migration; drain retries every 5 s until the emptied pod may go. virt-handler is a
    DaemonSet: `--ignore-daemonsets` leaves it running on the drained node. virt-api and
    virt-controller are Deployments: as upstream's (which virt-operator guards with a
    PodDisruptionBudget, minAvailable replicas - 1, for two replicas), drain evicts their
    pods like any other and their Deployments start them on the other node. virt-api runs
    one replica here and its webhook (failurePolicy Fail) is what lets the launcher pod
    wait: while it moves, an eviction gets a 500 and drain gives up. So the VM is steered
    (preferred affinity only: it must stay free to move) away from virt-api's node, and
    the test drains the VM's node.
    """
    api_nodes = {
        p["spec"].get("nodeName") for p in _kubevirt_pods(kubevirt) if _component(p) == "virt-api"
    }
    vm = _vm(kubevirt, "drained")
    spec = vm["spec"]["template"]["spec"]
    spec["evictionStrategy"] = "LiveMigrate"
    if api_nodes - {None}:
        spec["affinity"] = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "NotIn",
                                    "values": sorted(n for n in api_nodes if n),
                                }
                            ]
                        },
                    }
                ]
            }
        }
    vmi = _boot(kubevirt, vm, namespace)
    assert _condition(vmi, "LiveMigratable").get("status") == "True", vmi["status"]
    source = vmi["status"]["nodeName"]
    assert source not in api_nodes, f"the VM landed on virt-api's node {source}"
    other = next(n for n in nodes if n != source)
    token = secrets.token_hex(6)
    kubevirt.in_guest("drained", namespace, f"echo {token} > /tmp/kv-drain-marker")
    before = _uptime(kubevirt, "drained", namespace)
    ours_before = {
        p["metadata"]["uid"]: p
        for p in _kubevirt_pods(kubevirt)
        if p["spec"].get("nodeName") == source and p["status"].get("phase") == "Running"
    }
    handlers_before = {u for u, p in ours_before.items() if _component(p) == "virt-handler"}
    assert handlers_before or not ours_before, "a virt-handler pod runs on every node"

    uncordon.append(source)
    drain = kubevirt.kubectl.run(
        "drain",
        source,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        f"--timeout={MIGRATION_TIMEOUT:g}s",
        check=False,
        timeout=MIGRATION_TIMEOUT + 60,
    )
    said = f"kubectl drain said:\n{drain.stdout}\n{drain.stderr}"
    assert drain.returncode == 0, said
    # The launcher pod's first evictions were refused (429, retried) while it migrated.
    assert "Eviction triggered evacuation of VMI" in drain.stderr, said

    vmi = kubevirt.get("vmi", "drained", namespace)
    assert vmi is not None, said
    assert vmi["status"]["phase"] == "Running", said
    assert vmi["status"]["nodeName"] == other, f"the VM left {source}: {vmi['status']}"
    migrations = json.loads(
        kubevirt.kubectl.run("get", "vmim", "-n", namespace, "-o", "json").stdout
    )["items"]
    evacuations = [
        m
        for m in migrations
        if m["metadata"].get("annotations", {}).get("kubevirt.io/evacuationMigration") == source
    ]
    assert len(evacuations) == 1, [m["metadata"]["name"] for m in migrations]
    evacuation = evacuations[0]["metadata"]["name"]
    assert evacuation.startswith("kubevirt-evacuation-")
    # The VMIM's Succeeded and the source pod's end are two writes in no fixed order.
    vmim = _vmim_in(kubevirt, evacuation, namespace, ("Succeeded",))
    _confirm_post_migration(kubevirt, "drained", namespace, vmim, source)
    marker = kubevirt.in_guest("drained", namespace, "cat /tmp/kv-drain-marker")
    assert token in marker, f"the guest lost its RAM (rebooted?):\n{marker}"
    assert _uptime(kubevirt, "drained", namespace) > before
    assert not [
        p["metadata"]["name"]
        for p in _launcher_pods(kubevirt, "drained", namespace)
        if p["spec"].get("nodeName") == source
    ], "drain waited for the emptied launcher pod to be gone"

    # Ours on the drained node: the DaemonSet's virt-handler stayed; the Deployments'
    # pods were evicted and run again, ready, on the other node.
    ours_after = _kubevirt_pods(kubevirt)
    still = {p["metadata"]["uid"] for p in ours_after if p["spec"].get("nodeName") == source}
    assert handlers_before <= still, "virt-handler (a DaemonSet) is never evicted"
    evicted = [p for u, p in ours_before.items() if u not in still]
    owners = {
        (p["metadata"]["name"], ref.get("kind"))
        for p in evicted
        for ref in p["metadata"].get("ownerReferences") or []
        if ref.get("controller")
    }
    assert all(kind == "ReplicaSet" for _, kind in owners), f"evicted: {owners}"
    for component in {_component(p) for p in evicted}:
        kubevirt.wait_for(
            f"{component} running again on {other}",
            lambda component=component: [
                p
                for p in _kubevirt_pods(kubevirt)
                if _component(p) == component
                and p["spec"].get("nodeName") == other
                and p["status"].get("phase") == "Running"
            ],
            120,
        )
    assert (
        any(_ready(p) for p in _kubevirt_pods(kubevirt) if _component(p) == "virt-api")
        or not api_nodes
    )

    kubevirt.kubectl.run("uncordon", source)
    node = json.loads(kubevirt.kubectl.run("get", "node", source, "-o", "json").stdout)
    assert not node["spec"].get("unschedulable"), "uncordon makes the node schedulable again"
