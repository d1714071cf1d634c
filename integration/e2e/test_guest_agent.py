"""The QEMU guest agent of the tiny guest, seen through the VMI and virtctl (upstream's
tests/compute/guest_agent.go, "GuestAgent info", adapted to the busybox guest).

The guest (tools/images, kv_images.guest) runs Debian's qemu-ga on the virtio-serial port
`org.qemu.guest_agent.0`, names itself in /etc/os-release (GUEST_OS_NAME) and mounts its
cloud-init disk (iso9660 on virtio-blk) at /mnt/cidata and an ext2 RAM disk at /data, so
the agent has real filesystems to report and to freeze. Its shell is the bare
console shell (no login(1), so no utmp entry): `userlist` is an empty list ([4629]).
Access credentials through the agent: a Secret's key lets `virtctl ssh` in (the guest runs
dropbear), `virtctl credentials` edits the Secrets and the guest follows, the password
lands in /etc/passwd, and the VMI says AccessCredentialsSynchronized.

Each test makes its own VM in its own namespace.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from kv_images.guest import GUEST_AGENT_MARKER, GUEST_OS_NAME

SUBRESOURCES = "/apis/subresources.kubevirt.io/v1"
_NO_HOST_CHECK = ("-t", "-o StrictHostKeyChecking=no", "-t", "-o UserKnownHostsFile=/dev/null")


def agent_vm(
    kubevirt: Any, name: str, credential_secret: str | None = None, password_secret: str = ""
) -> dict[str, Any]:
    """The kernel-boot guest on the pod network with a cloud-init disk (a real filesystem)."""
    vm = kubevirt.vm(name)
    spec = vm["spec"]["template"]["spec"]
    spec["domain"]["devices"]["interfaces"] = [{"name": "default", "masquerade": {}}]
    spec["networks"] = [{"name": "default", "pod": {}}]
    # virtio: the guest kernel has no AHCI driver for the default SATA bus.
    spec["domain"]["devices"]["disks"] = [{"name": "cloudinit", "disk": {"bus": "virtio"}}]
    spec["volumes"] = [{"name": "cloudinit", "cloudInitNoCloud": {"userData": "#cloud-config\n"}}]
    if credential_secret:
        spec["accessCredentials"] = [
            {
                "sshPublicKey": {
                    "source": {"secret": {"secretName": credential_secret}},
                    "propagationMethod": {"qemuGuestAgent": {"users": ["root"]}},
                }
            }
        ]
    if password_secret:
        spec.setdefault("accessCredentials", []).append(
            {
                "userPassword": {
                    "source": {"secret": {"secretName": password_secret}},
                    "propagationMethod": {"qemuGuestAgent": {}},
                }
            }
        )
    return vm


def conditions(vmi: dict[str, Any] | None) -> dict[str, str]:
    found = ((vmi or {}).get("status") or {}).get("conditions") or []
    return {c["type"]: c["status"] for c in found}


def boot_with_agent(kubevirt: Any, vm: dict[str, Any], namespace: str) -> dict[str, Any]:
    """Apply `vm`; the VMI once it is Running with AgentConnected and guestOSInfo."""
    name = vm["metadata"]["name"]
    kubevirt.apply(vm, namespace)
    kubevirt.wait_running(name, namespace)
    console = kubevirt.console_marker(name, namespace, timeout=120)
    assert f"{GUEST_AGENT_MARKER} /dev/vport" in console, (
        "the guest should start qemu-ga on the org.qemu.guest_agent.0 port; console tail:\n"
        + "\n".join(console.splitlines()[-25:])
    )

    def connected() -> dict[str, Any] | None:
        vmi = kubevirt.get("vmi", name, namespace)
        status = (vmi or {}).get("status") or {}
        named = (status.get("guestOSInfo") or {}).get("name")
        return vmi if conditions(vmi).get("AgentConnected") == "True" and named else None

    # [test_id:1677] the condition; [test_id:4626] guestOSInfo in the status.
    return kubevirt.wait_for(f"VMI {name} AgentConnected with guestOSInfo", connected, 90)


def virtctl_json(kubevirt: Any, *args: str) -> Any:
    proc = kubevirt.virtctl(*args)
    assert proc.returncode == 0, f"virtctl {' '.join(args)} failed: {proc.stderr.strip()}"
    return json.loads(proc.stdout)


def put_subresource(
    kubevirt: Any, namespace: str, name: str, action: str, body: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """PUT a VMI subresource through the aggregated API (kubectl replace --raw)."""
    path = f"{SUBRESOURCES}/namespaces/{namespace}/virtualmachineinstances/{name}/{action}"
    result: subprocess.CompletedProcess[str] = kubevirt.kubectl.run(
        "replace", "--raw", path, "-f", "-", stdin=json.dumps(body), check=False
    )
    return result


def test_the_agent_reports_freezes_and_goes(kubevirt: Any, namespace: str) -> None:
    vmi = boot_with_agent(kubevirt, agent_vm(kubevirt, "agent"), namespace)
    status = vmi["status"]
    assert status["guestOSInfo"]["name"] == GUEST_OS_NAME
    assert status["guestOSInfo"]["kernelRelease"].endswith("-cloud-amd64")
    assert "AgentVersionNotSupported" not in conditions(vmi)
    # The agent names the guest's NIC; the pod IP stays the VMI's address (masquerade).
    primary = kubevirt.wait_for(
        "status.interfaces merged with the agent's",
        lambda: next(
            (
                i
                for i in (kubevirt.get("vmi", "agent", namespace) or {})
                .get("status", {})
                .get("interfaces", [])
                if i.get("infoSource") == "domain, guest-agent"
            ),
            None,
        ),
        60,
    )
    assert primary["name"] == "default"
    assert primary["interfaceName"] == "eth0"
    # The pod's IP, not the guest's own 10.0.2.2 behind masquerade.
    assert primary["ipAddress"]
    assert not primary["ipAddress"].startswith("10.0.2."), primary

    # [test_id:4627] the whole report. The DHCP lease renames the guest after the VMI,
    # maybe after the agent's first answer: its next poll (10 s later) has the new name.
    info = kubevirt.wait_for(
        "guestosinfo naming the guest after its VMI",
        lambda: (
            answer
            if (answer := virtctl_json(kubevirt, "guestosinfo", "agent", "-n", namespace))[
                "hostname"
            ]
            == "agent"
            else None
        ),
        60,
    )
    assert info["os"]["name"] == GUEST_OS_NAME
    assert info["timezone"].startswith("UTC")
    assert info["guestAgentVersion"].startswith("7.")
    supported = {c["name"] for c in info["supportedCommands"]}
    assert {"guest-ping", "guest-info", "guest-get-fsinfo", "guest-shutdown"} <= supported
    assert info["fsInfo"]["disks"], info
    # [test_id:4630] the filesystems, with the disk's bus.
    filesystems = virtctl_json(kubevirt, "fslist", "agent", "-n", namespace)["items"]
    by_mount = {fs["mountPoint"]: fs for fs in filesystems}
    assert by_mount["/mnt/cidata"]["fileSystemType"] == "iso9660"
    assert by_mount["/mnt/cidata"]["disk"][0]["busType"] == "virtio"
    assert by_mount["/data"]["fileSystemType"] == "ext2"
    # [test_id:4629] nobody logs in through login(1) here (upstream's test logs in first).
    users = virtctl_json(kubevirt, "userlist", "agent", "-n", namespace)
    assert users["items"] == []

    # Freeze and unfreeze (what snapshots use): the VMI shows the frozen state.
    refused = put_subresource(kubevirt, namespace, "agent", "freeze", {})
    assert refused.returncode != 0
    assert "Unfreeze timeout must be provided" in refused.stderr
    frozen = put_subresource(kubevirt, namespace, "agent", "freeze", {"unfreezeTimeout": "5m"})
    assert frozen.returncode == 0, frozen.stderr
    kubevirt.wait_for(
        "status.fsFreezeStatus frozen",
        lambda: (
            (kubevirt.get("vmi", "agent", namespace) or {}).get("status", {}).get("fsFreezeStatus")
            == "frozen"
        ),
        30,
    )
    assert virtctl_json(kubevirt, "guestosinfo", "agent", "-n", namespace)["fsFreezeStatus"] == (
        "frozen"
    )
    thawed = put_subresource(kubevirt, namespace, "agent", "unfreeze", {})
    assert thawed.returncode == 0, thawed.stderr
    kubevirt.wait_for(
        "status.fsFreezeStatus cleared",
        lambda: (
            "fsFreezeStatus"
            not in (kubevirt.get("vmi", "agent", namespace) or {}).get(
                "status", {"fsFreezeStatus": "?"}
            )
        ),
        30,
    )

    # [test_id:4625] the agent stops: the condition goes; [test_id:4628] the 409.
    kubevirt.in_guest("agent", namespace, "kill $(cat /run/qemu-ga.pid)")
    kubevirt.wait_for(
        "AgentConnected to be removed",
        lambda: "AgentConnected" not in conditions(kubevirt.get("vmi", "agent", namespace)),
        60,
    )
    for command in ("guestosinfo", "userlist", "fslist"):
        gone = kubevirt.virtctl(command, "agent", "-n", namespace)
        assert gone.returncode == 1
        assert "VMI does not have guest agent connected" in gone.stderr, gone.stderr


def _password_matches(kubevirt: Any, name: str, namespace: str, password: str) -> bool:
    """Whether root's hash in the guest's /etc/passwd is `password` (same salt)."""
    check = (
        "h=$(awk -F: '$1 == \"root\" { print $2 }' /etc/passwd); "
        "s=$(echo \"$h\" | cut -d'$' -f3); "
        f'[ -n "$s" ] && [ "$(printf %s \'{password}\' | mkpasswd -m sha512 -S "$s" -P 0)" '
        '= "$h" ] && echo PASSWORD-MATCHES'
    )
    return "PASSWORD-MATCHES" in kubevirt.in_guest(name, namespace, check)


def test_an_ssh_key_propagated_by_the_agent_lets_virtctl_ssh_in(
    kubevirt: Any, namespace: str, tmp_path: Path
) -> None:
    keys = {}
    for name in ("agent-key", "second-key"):
        key = tmp_path / name
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True
        )
        keys[name] = (key, (tmp_path / f"{name}.pub").read_text().strip())
    kubevirt.kubectl.run(
        "create", "secret", "generic", "agent-key", "-n", namespace,
        f"--from-literal=key1={keys['agent-key'][1]}",
    )  # fmt: skip
    kubevirt.kubectl.run(
        "create", "secret", "generic", "agent-password", "-n", namespace,
        "--from-literal=root=first-Passw0rd",
    )  # fmt: skip
    vm = agent_vm(kubevirt, "agentssh", "agent-key", password_secret="agent-password")
    boot_with_agent(kubevirt, vm, namespace)

    def ssh_works(key: Path) -> str | None:
        proc = kubevirt.virtctl(
            "ssh", "-n", namespace, "-i", str(key), "-l", "root", *_NO_HOST_CHECK,
            "-c", "hostname", "vmi/agentssh",
        )  # fmt: skip
        return proc.stdout if proc.returncode == 0 else None

    # The launcher adds the key once the agent is connected: allow it a poll or two.
    out = kubevirt.wait_for(
        "virtctl ssh with the agent-propagated key", lambda: ssh_works(keys["agent-key"][0]), 60
    )
    assert out.strip().splitlines()[-1] == "agentssh", out
    synced = kubevirt.wait_for(
        "AccessCredentialsSynchronized True",
        lambda: (
            conditions(kubevirt.get("vmi", "agentssh", namespace)).get(
                "AccessCredentialsSynchronized"
            )
            == "True"
        ),
        60,
    )
    assert synced
    assert _password_matches(kubevirt, "agentssh", namespace, "first-Passw0rd")

    # virtctl credentials edits the Secrets (not the VM's own: --force); kubelet refreshes
    # the mounted files within a minute or two and the launcher applies them.
    def credentials(*argv: str) -> None:
        proc = kubevirt.virtctl("credentials", *argv, "--force", "agentssh", "-n", namespace)
        assert proc.returncode == 0, proc.stderr

    credentials("add-ssh-key", "--user", "root", "--value", keys["second-key"][1])
    kubevirt.wait_for(
        "virtctl ssh with the key virtctl credentials added",
        lambda: ssh_works(keys["second-key"][0]),
        240,
    )
    credentials("remove-ssh-key", "--user", "root", "--value", keys["agent-key"][1])
    kubevirt.wait_for(
        "the removed key to be refused",
        lambda: ssh_works(keys["agent-key"][0]) is None,
        240,
    )
    assert ssh_works(keys["second-key"][0]) is not None
    credentials("set-password", "--user", "root", "--password", "second-Passw0rd")
    kubevirt.wait_for(
        "the new password in the guest",
        lambda: _password_matches(kubevirt, "agentssh", namespace, "second-Passw0rd"),
        240,
    )
