"""The e2e tier: the whole local cluster with a real node and real guests.

`kubevirt` (session) brings the cluster up like `kv-cluster up` (control plane, node,
virt-api, virt-controller, a virt-handler per node), builds the launcher and guest
images with kv-images (cached by content) and pushes them to the cluster's registry
(the node pulls them), and checks that the KubeVirt CR asks for emulation when KVM
cannot run guests here.

Nothing sleeps to pass: every wait polls a real condition until a deadline.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kv_cluster.kubectl import Kubectl
from kv_cluster.kubevirt_pods import PodHandler, runs_as_pods
from kv_cluster.nodes import node_specs, read_node_count
from kv_cluster.virt_node import VirtHandler
from kv_soak.guest import ConsoleQuestion, virtctl_argv, vm_manifest

REPO_ROOT = Path(__file__).resolve().parents[2]
GUEST_MARKER = "KUBEVIRT-PY-GUEST-READY"
IMAGES = ("virt-launcher", "guest-kernel-boot", "guest-containerdisk")
#: Nodes of the e2e cluster: two, so a guest has somewhere to migrate to.
E2E_NODES = 2
T = TypeVar("T")
#: Upgrades KubeVirt under a guest and uninstalls it (putting it back): run after the rest.
LAST = "test_operator.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every other e2e test runs before test_operator.py, on the same cluster (a stable
    sort: each file keeps its order)."""
    items.sort(key=lambda item: item.path.name == LAST)


def wait_for(
    what: str,
    check: Callable[[], T | None],
    timeout: float,
    interval: float = 0.5,
    explain: Callable[[], str] | None = None,
) -> T:
    """Poll `check` until it returns something truthy; fail naming `what` at the deadline.

    `explain` is asked at the deadline for what the cluster shows (the failure's evidence).
    """
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    evidence = f"\n{explain()}" if explain is not None else ""
    pytest.fail(f"timed out after {timeout:g}s waiting for {what} (last: {last!r}){evidence}")


@dataclass(frozen=True)
class KubeVirtEnv:
    """The cluster with KubeVirt on it, and the handles the tests need."""

    kubeconfig: Path
    kubectl: Kubectl
    node: str
    handler: VirtHandler | PodHandler
    #: Every node's virt-handler, by node name (`node` first); migrations move between them.
    handlers: dict[str, VirtHandler | PodHandler]

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        found = self.kubectl.run("get", kind, name, "-n", namespace, "-o", "json", check=False)
        return json.loads(found.stdout) if found.returncode == 0 else None

    def virtctl(
        self, *args: str, timeout: float = 120, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run virtctl against the cluster; `input` is typed on its stdin (console, ssh)."""
        return subprocess.run(
            virtctl_argv(self.kubeconfig, *args),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def phase(self, name: str, namespace: str) -> str | None:
        vmi = self.get("vmi", name, namespace)
        return None if vmi is None else (vmi.get("status") or {}).get("phase")

    def wait_running(self, name: str, namespace: str, timeout: float = 180) -> dict[str, Any]:
        def running() -> dict[str, Any] | None:
            vmi = self.get("vmi", name, namespace)
            if vmi is not None and (vmi.get("status") or {}).get("phase") == "Running":
                return vmi
            return None

        return wait_for(
            f"VMI {namespace}/{name} Running",
            running,
            timeout,
            explain=lambda: self.describe_namespace(namespace),
        )

    def describe_namespace(self, namespace: str) -> str:
        """What a VMI that never ran leaves behind: its objects, pods and Events, and nodes."""
        parts = []
        for argv in (
            ("get", "vm,vmi,vmim,pods", "-n", namespace, "-o", "wide"),
            ("get", "vmi", "-n", namespace, "-o", "jsonpath={.items[*].status}"),
            ("get", "events", "-n", namespace, "--sort-by=.lastTimestamp"),
            ("describe", "pods", "-n", namespace),
            ("get", "nodes", "-o", "wide"),
            ("describe", "nodes"),
        ):
            found = self.kubectl.run(*argv, check=False)
            parts.append(f"$ kubectl {' '.join(argv)}\n{found.stdout[-4000:]}{found.stderr[-500:]}")
        return "\n".join(parts)

    def wait_no_launcher_pods(self, namespace: str, timeout: float = 120) -> None:
        """Wait until `namespace` holds no virt-launcher pod (a stopped VM's is gone)."""

        def none_left() -> bool:
            pods = self.kubectl.run(
                "get", "pods", "-n", namespace, "-l", "kubevirt.io=virt-launcher", "-o", "name"
            ).stdout.split()
            return not pods

        wait_for("the launcher pod to be gone", none_left, timeout)

    def stop(self, name: str, namespace: str) -> None:
        """`virtctl stop` the VM, then wait until its VMI and launcher pod are gone."""
        stopped = self.virtctl("stop", name, "-n", namespace)
        assert stopped.returncode == 0, stopped.stderr
        wait_for("the VMI to be gone", lambda: self.get("vmi", name, namespace) is None, 120)
        self.wait_no_launcher_pods(namespace)

    def console_marker(self, name: str, namespace: str, timeout: float = 60) -> str:
        """Read the guest's console until the marker shows (the serial log replays it)."""
        proc = self.virtctl(
            "console",
            name,
            "-n",
            namespace,
            f"--until={GUEST_MARKER}",
            f"--timeout-seconds={timeout:g}",
            timeout=timeout + 30,
        )
        assert proc.returncode == 0, f"virtctl console failed: {proc.stderr.strip()}"
        return proc.stdout

    def in_guest(self, name: str, namespace: str, command: str, timeout: float = 60) -> str:
        """Type `command` into the guest's shell; its output (the console up to a done marker).

        The marker is computed by the shell, so the echoed command line does not contain
        it, and only what follows the echoed line is returned (the replayed log comes first).
        """
        question = ConsoleQuestion.new()
        proc = self.virtctl(
            "console",
            name,
            "-n",
            namespace,
            f"--until={question.until}",
            f"--timeout-seconds={timeout:g}",
            timeout=timeout + 30,
            input=question.typed(command),
        )
        assert proc.returncode == 0, (
            f"virtctl console for {command!r} failed: {proc.stderr.strip()}\n"
            f"console tail:\n{proc.stdout[-2000:]}"
        )
        return question.answer(proc.stdout)

    def apply(self, manifest: dict[str, Any] | str, namespace: str) -> None:
        text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest)
        self.kubectl.run("apply", "-n", namespace, "-f", "-", stdin=text)

    marker: str = GUEST_MARKER

    @staticmethod
    def wait_for(
        what: str,
        check: Callable[[], T | None],
        timeout: float,
        explain: Callable[[], str] | None = None,
    ) -> T:
        """Poll `check` until truthy (see module-level wait_for)."""
        return wait_for(what, check, timeout, explain=explain)

    def vm(
        self, name: str, run_strategy: str = "Always", *, pinned: bool = True, **kw: Any
    ) -> dict[str, Any]:
        """A tiny VM manifest (see vm_manifest), on `node` unless `pinned` is False.

        The cluster has two nodes (for migrations); tests that kill `handler` or read its
        node need their guest on `node`, so VMs are pinned there unless a test moves them.
        """
        return vm_manifest(name, run_strategy, node=self.node if pinned else None, **kw)

    @staticmethod
    def claim(name: str, size: str = "64Mi") -> dict[str, Any]:
        """A ReadWriteOnce PVC manifest; no storageClassName: the default class provisions it."""
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": size}},
            },
        }

    @staticmethod
    def with_claim_disk(vm: dict[str, Any], claim: str) -> dict[str, Any]:
        """`vm` with one virtio disk `data` on the PVC `claim` (its only volume)."""
        spec = vm["spec"]["template"]["spec"]
        spec["domain"]["devices"]["disks"] = [{"name": "data", "disk": {"bus": "virtio"}}]
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        return vm

    @property
    def other_node(self) -> str:
        """A node other than `node` (a migration's target)."""
        return next(n for n in self.handlers if n != self.node)

    def handler_pid(self) -> int:
        record = self.handler.record()
        assert record is not None, "virt-handler was never started"
        assert record.alive(), "virt-handler is not running"
        return record.pid


def _build_images() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kv_images.cli", "build", *IMAGES],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
    )
    if proc.returncode != 0:
        pytest.fail(f"kv-images build {' '.join(IMAGES)} failed:\n{proc.stderr[-3000:]}")


@pytest.fixture(scope="session")
def kubevirt(kube: Any) -> Iterator[KubeVirtEnv]:
    """The local cluster with a node, KubeVirt's components and the guest images.

    e2e sessions sharing one cluster run one at a time (a file lock in its state dir):
    these tests kill virt-handler and QEMUs, which would break another session's guests.
    """
    local = kube.require_local()
    ctx = local._context()
    if read_node_count(ctx.layout) < E2E_NODES:
        # The session cluster may have fewer nodes (`make demo` runs one); migrations need two.
        local.up(nodes=E2E_NODES)
        ctx = local._context()
    lock = open(ctx.layout.root / "e2e.lock", "w")  # noqa: SIM115 - held for the session
    print("e2e: waiting for other e2e sessions on this cluster", file=sys.stderr)
    fcntl.flock(lock, fcntl.LOCK_EX)
    _build_images()
    nodes = node_specs(ctx.config, ctx.layout, E2E_NODES)
    # Pod mode: the DaemonSet's pod on the node (same log file, its host process, Ready again).
    handlers: dict[str, VirtHandler | PodHandler] = {
        n.name: PodHandler(ctx, n) if runs_as_pods(ctx) else VirtHandler(ctx, n) for n in nodes
    }
    node = nodes[0]
    handler = handlers[node.name]
    kubectl = kube.kubectl
    kv = json.loads(
        kubectl.run("get", "kubevirt", "-n", "kubevirt", "kubevirt", "-o", "json").stdout
    )
    dev = kv["spec"]["configuration"]["developerConfiguration"]
    assert dev.get("useEmulation") is True or os.path.exists("/dev/kvm")
    env = KubeVirtEnv(kube.kubeconfig, kubectl, node.name, handler, handlers)
    for name in handlers:
        wait_for(
            f"node {name} schedulable for VMs",
            lambda name=name: (
                (
                    json.loads(kubectl.run("get", "node", name, "-o", "json").stdout)["metadata"]
                    .get("labels", {})
                    .get("kubevirt.io/schedulable")
                )
                == "true"
            ),
            60,
        )
    try:
        yield env
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
