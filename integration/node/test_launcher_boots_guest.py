"""A pod from the launcher base image boots the tiny guest from the kernel-boot image under
QEMU (TCG, no /dev/kvm)."""

from __future__ import annotations

from typing import Any

from kv_images import GUEST_MARKER


def test_launcher_pod_boots_the_tiny_guest(node_cluster: Any, node_namespace: str) -> None:
    qemu = [
        "qemu-system-x86_64",
        "-accel",
        "tcg",
        "-m",
        "128",
        "-nodefaults",
        "-display",
        "none",
        "-no-reboot",
        "-serial",
        "stdio",
        "-kernel",
        "/guest/vmlinuz",
        "-initrd",
        "/guest/initrd.img",
        "-append",
        "console=ttyS0 quiet",
    ]
    node_cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "launcher", "namespace": node_namespace},
            "spec": {
                "restartPolicy": "Never",
                # As KubeVirt runs its launchers: the qemu user, no privileges.
                "securityContext": {"runAsUser": 107, "runAsGroup": 107, "runAsNonRoot": True},
                "containers": [
                    {
                        "name": "compute",
                        "image": node_cluster.images["launcher-base"].ref,
                        "imagePullPolicy": "IfNotPresent",
                        "command": qemu,
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "resources": {"limits": {"memory": "512Mi", "cpu": "1"}},
                        "volumeMounts": [
                            {"name": "guest", "mountPath": "/guest", "readOnly": True}
                        ],
                    }
                ],
                # As KubeVirt's kernel-boot container: the guest image (FROM scratch) has no
                # program, so a static busybox from the launcher base copies its files out.
                "initContainers": [
                    {
                        "name": "tools",
                        "image": node_cluster.images["launcher-base"].ref,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["cp", "/bin/busybox", "/tools/busybox"],
                        "volumeMounts": [{"name": "tools", "mountPath": "/tools"}],
                    },
                    {
                        "name": "kernel-boot",
                        "image": node_cluster.images["guest-kernel-boot"].ref,
                        "imagePullPolicy": "IfNotPresent",
                        "command": [
                            "/tools/busybox",
                            "cp",
                            "/boot/vmlinuz",
                            "/boot/initrd.img",
                            "/guest/",
                        ],
                        "volumeMounts": [
                            {"name": "tools", "mountPath": "/tools", "readOnly": True},
                            {"name": "guest", "mountPath": "/guest"},
                        ],
                    },
                ],
                "volumes": [{"name": "tools", "emptyDir": {}}, {"name": "guest", "emptyDir": {}}],
            },
        },
    )

    def marker() -> str | None:
        proc = node_cluster.kubectl.run("logs", "launcher", "-n", node_namespace, check=False)
        return proc.stdout if GUEST_MARKER in proc.stdout else None

    # Generous: the guest (qemu-ga, a RAM disk made at boot) takes minutes under TCG on a
    # loaded 2-core node whose pod may use one CPU.
    node_cluster.wait_for(marker, 300, f"{GUEST_MARKER} in the launcher pod's log", interval=0.5)
    uid = node_cluster.kubectl.run("exec", "launcher", "-n", node_namespace, "--", "id", "-u")
    assert uid.stdout.strip() == "107"
    exists = node_cluster.kubectl.run(
        "exec", "launcher", "-n", node_namespace, "--", "test", "-e", "/dev/kvm", check=False
    )
    assert exists.returncode != 0, "the pod was given /dev/kvm; this test boots with TCG only"
