"""The tiny guest VMs the soak (and the e2e tier) run, and how to ask one a question on
its serial console through `virtctl console` (aggregated API → virt-api → virt-handler).

One copy for both: integration/e2e's conftest imports these.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "GUEST_PULL_POLICY",
    "ConsoleQuestion",
    "VirtctlConsole",
    "virtctl_argv",
    "vm_manifest",
]

#: The guest images' `devel` tag moves with each build kv-images pushes to the cluster's
#: registry, so a node must not keep the one it pulled first.
GUEST_PULL_POLICY = "Always"


def vm_manifest(
    name: str,
    run_strategy: str = "Always",
    *,
    containerdisk: bool = False,
    poweroff: bool = False,
    node: str | None = None,
    binding: str | None = None,
) -> dict[str, Any]:
    """A tiny VM: the kernel-boot guest (or the containerDisk guest), on `node` if given;
    with `binding` (e.g. "masquerade") one interface on the pod network bound that way."""
    args = "console=ttyS0" + (" kubevirt_py.poweroff=1" if poweroff else "")
    if containerdisk:
        domain: dict[str, Any] = {
            "devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}]},
            "memory": {"guest": "128Mi"},
        }
        volumes = [
            {
                "name": "root",
                "containerDisk": {
                    "image": "kubevirt-py/guest-containerdisk:devel",
                    "imagePullPolicy": GUEST_PULL_POLICY,
                },
            }
        ]
    else:
        domain = {
            "firmware": {
                "kernelBoot": {
                    "container": {
                        "image": "kubevirt-py/guest-kernel-boot:devel",
                        "imagePullPolicy": GUEST_PULL_POLICY,
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
    if node is not None:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    if volumes:
        spec["volumes"] = volumes
    if binding is not None:
        domain["devices"]["interfaces"] = [{"name": "default", binding: {}}]
        spec["networks"] = [{"name": "default", "pod": {}}]
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {
            "runStrategy": run_strategy,
            "template": {"metadata": {"labels": {"kubevirt.io/vm": name}}, "spec": spec},
        },
    }


@dataclass(frozen=True)
class ConsoleQuestion:
    """A command typed into the guest's shell, ended by a marker the shell computes, so
    the echoed command line does not contain it and its sighting means the shell ran it."""

    token: str

    @classmethod
    def new(cls) -> ConsoleQuestion:
        return cls(secrets.token_hex(3))

    @property
    def until(self) -> str:
        """What `virtctl console --until` waits for."""
        return f"DONE-{self.token}-2"

    def typed(self, command: str) -> str:
        # Leading blanks: busybox's line editor can swallow the first keys typed while it
        # waits for the terminal's answer to its cursor query; losing blanks is harmless.
        return f"\n{' ' * 24}{command}; echo DONE-{self.token}-$((1+1))\n"

    def answer(self, output: str) -> str:
        """The command's output: what follows the echoed line (the replayed log comes first)."""
        return output.rpartition(f"DONE-{self.token}-$((1+1))")[2]


def virtctl_argv(kubeconfig: Path, *args: str) -> list[str]:
    """virtctl of this environment, against the cluster of `kubeconfig`."""
    return [sys.executable, "-m", "virtctl", *args, f"--kubeconfig={kubeconfig}"]


class VirtctlConsole:
    """The soak's console probe: the guest answers when `virtctl console` sees the shell's
    reply to a typed `uname` within the timeout."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace

    async def answers(self, name: str, within: float) -> bool:
        question = ConsoleQuestion.new()
        proc = await asyncio.create_subprocess_exec(
            *virtctl_argv(
                self.kubeconfig,
                "console",
                name,
                "-n",
                self.namespace,
                f"--until={question.until}",
                f"--timeout-seconds={within:g}",
            ),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await asyncio.wait_for(
                proc.communicate(question.typed("uname -s").encode()), within + 30
            )
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return False
        return proc.returncode == 0
