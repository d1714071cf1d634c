"""The e2e tier: the whole local cluster with a real node and real guests.

`kubevirt` (session) brings the cluster up like `kv-cluster up` (control plane, node,
virt-api, virt-controller, a virt-handler per node), builds the launcher and guest
images with kv-images (cached by content) and imports them into the node, and checks
that the KubeVirt CR asks for emulation when KVM cannot run guests here.

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
from kv_cluster.kubevirt_pods import PodHandler, pods_mode
from kv_cluster.nodes import node_specs, read_node_count
from kv_cluster.virt_node import VirtHandler

REPO_ROOT = Path(__file__).resolve().parents[2]
GUEST_MARKER = "KUBEVIRT-PY-GUEST-READY"
IMAGES = ("virt-launcher", "guest-kernel-boot", "guest-containerdisk")
T = TypeVar("T")


def wait_for(what: str, check: Callable[[], T | None], timeout: float, interval: float = 0.5) -> T:
    """Poll `check` until it returns something truthy; fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")


@dataclass(frozen=True)
class KubeVirtEnv:
    """The cluster with KubeVirt on it, and the handles the tests need."""

    kubeconfig: Path
    kubectl: Kubectl
    node: str
    handler: VirtHandler | PodHandler

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        found = self.kubectl.run("get", kind, name, "-n", namespace, "-o", "json", check=False)
        return json.loads(found.stdout) if found.returncode == 0 else None

    def virtctl(
        self, *args: str, timeout: float = 120, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run virtctl against the cluster; `input` is typed on its stdin (console, ssh)."""
        return subprocess.run(
            [sys.executable, "-m", "virtctl", *args, f"--kubeconfig={self.kubeconfig}"],
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

        return wait_for(f"VMI {namespace}/{name} Running", running, timeout)

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

    def apply(self, manifest: dict[str, Any] | str, namespace: str) -> None:
        text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest)
        self.kubectl.run("apply", "-n", namespace, "-f", "-", stdin=text)

    marker: str = GUEST_MARKER

    @staticmethod
    def wait_for(what: str, check: Callable[[], T | None], timeout: float) -> T:
        """Poll `check` until truthy (see module-level wait_for)."""
        return wait_for(what, check, timeout)

    @staticmethod
    def vm(name: str, run_strategy: str = "Always", **kw: Any) -> dict[str, Any]:
        """A tiny VM manifest (see vm_manifest)."""
        return vm_manifest(name, run_strategy, **kw)

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
    if read_node_count(ctx.layout) == 0:
        # The session cluster starts without nodes; e2e needs one, as `make demo` has.
        local.up(nodes=1)
        ctx = local._context()
    lock = open(ctx.layout.root / "e2e.lock", "w")  # noqa: SIM115 - held for the session
    print("e2e: waiting for other e2e sessions on this cluster", file=sys.stderr)
    fcntl.flock(lock, fcntl.LOCK_EX)
    _build_images()
    node = node_specs(ctx.config, ctx.layout, 1)[0]
    # Pod mode: the DaemonSet's pod on the node (same log file, its host process, Ready again).
    handler = PodHandler(ctx, node) if pods_mode(ctx) else VirtHandler(ctx, node)
    kubectl = kube.kubectl
    kv = json.loads(
        kubectl.run("get", "kubevirt", "-n", "kubevirt", "kubevirt", "-o", "json").stdout
    )
    dev = kv["spec"]["configuration"]["developerConfiguration"]
    assert dev.get("useEmulation") is True or os.path.exists("/dev/kvm")
    env = KubeVirtEnv(kube.kubeconfig, kubectl, node.name, handler)
    wait_for(
        f"node {node.name} schedulable for VMs",
        lambda: (
            (
                json.loads(kubectl.run("get", "node", node.name, "-o", "json").stdout)["metadata"]
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


def vm_manifest(
    name: str, run_strategy: str = "Always", *, containerdisk: bool = False, poweroff: bool = False
) -> dict[str, Any]:
    """A tiny VM: the kernel-boot guest (or the containerDisk guest)."""
    args = "console=ttyS0" + (" kubevirt_py.poweroff=1" if poweroff else "")
    if containerdisk:
        domain: dict[str, Any] = {
            "devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}]},
            "memory": {"guest": "128Mi"},
        }
        volumes = [
            {"name": "root", "containerDisk": {"image": "kubevirt-py/guest-containerdisk:devel"}}
        ]
    else:
        domain = {
            "firmware": {
                "kernelBoot": {
                    "container": {
                        "image": "kubevirt-py/guest-kernel-boot:devel",
                        "imagePullPolicy": "IfNotPresent",
                        "kernelPath": "/boot/vmlinuz",
                        "initrdPath": "/boot/initrd.img",
                    },
                    "kernelArgs": args,
                }
            },
            "devices": {},
            "memory": {"guest": "128Mi"},
        }
        volumes = []
    spec: dict[str, Any] = {"domain": domain, "terminationGracePeriodSeconds": 0}
    if volumes:
        spec["volumes"] = volumes
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {
            "runStrategy": run_strategy,
            "template": {"metadata": {"labels": {"kubevirt.io/vm": name}}, "spec": spec},
        },
    }
