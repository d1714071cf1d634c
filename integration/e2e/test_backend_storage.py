"""Backend storage: a VM with persistent EFI keeps an EFI variable its guest wrote across a
stop and a start (OVMF's variable store on the VM's `persistent-state-for-<vm>` claim),
and the claim goes with the VM; a VM with a persistent TPM keeps an NV index its guest
defined (swtpm's state on the same claim)."""

from __future__ import annotations

import json
import re
from typing import Any

# A vendor GUID of our own (the kernel refuses unknown names under EFI_GLOBAL_VARIABLE);
# the 4 leading bytes written are the attributes
# (non-volatile, boot-service and runtime access), as efivarfs wants them written.
_VARIABLE = "KubevirtPyTest-3f6a3e52-1c9c-4b5e-9c1f-6b8e0d1c2a7f"
_EFIVARS = "/sys/firmware/efi/efivars"


def _efi_vm(kubevirt: Any, name: str) -> dict[str, Any]:
    vm: dict[str, Any] = kubevirt.vm(name)
    domain = vm["spec"]["template"]["spec"]["domain"]
    domain["firmware"]["bootloader"] = {"efi": {"secureBoot": False, "persistent": True}}
    # OVMF with the kernel's EFI stub faults in the tiny guest's 128Mi (an X64 exception
    # on the console, no kernel): it needs more room than a BIOS boot.
    domain["memory"] = {"guest": "384Mi"}
    return vm


def test_a_persistent_efi_variable_survives_a_restart_on_the_vms_claim(
    kubevirt: Any, namespace: str
) -> None:
    kubevirt.apply(_efi_vm(kubevirt, "efi"), namespace)
    first = kubevirt.wait_running("efi", namespace)
    assert kubevirt.marker in kubevirt.console_marker("efi", namespace, timeout=180)
    # Booted by OVMF: the guest sees EFI runtime services and its variables.
    listed = kubevirt.in_guest(
        "efi", namespace, f"echo efivars=$(ls {_EFIVARS} | wc -l)", timeout=120
    )
    found = re.search(r"efivars=(\d+)", listed)
    assert found is not None, listed
    assert int(found.group(1)) > 0, listed
    wrote = kubevirt.in_guest(
        "efi",
        namespace,
        f"printf '\\007\\000\\000\\000kvpy-efi-marker' > {_EFIVARS}/{_VARIABLE}; echo wrote=$?",
    )
    assert "wrote=0" in wrote, wrote
    written = kubevirt.in_guest("efi", namespace, f"tail -c 15 {_EFIVARS}/{_VARIABLE}")
    assert "kvpy-efi-marker" in written

    claim = json.loads(
        kubevirt.kubectl.run(
            "get", "pvc", "persistent-state-for-efi", "-n", namespace, "-o", "json"
        ).stdout
    )
    vm = kubevirt.get("vm", "efi", namespace)
    assert vm is not None
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"]) == ("VirtualMachine", vm["metadata"]["uid"])
    assert claim["status"]["phase"] == "Bound"

    kubevirt.stop("efi", namespace)
    started = kubevirt.virtctl("start", "efi", "-n", namespace)
    assert started.returncode == 0, started.stderr
    second = kubevirt.wait_running("efi", namespace)
    assert kubevirt.marker in kubevirt.console_marker("efi", namespace, timeout=180)
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    kept = kubevirt.in_guest("efi", namespace, f"tail -c 15 {_EFIVARS}/{_VARIABLE}", timeout=120)
    assert "kvpy-efi-marker" in kept

    kubevirt.kubectl.run("delete", "vm", "efi", "-n", namespace, "--wait=true")

    def claim_gone() -> bool:
        found = kubevirt.kubectl.run(
            "get", "pvc", "-n", namespace, "-o", "name", check=False
        ).stdout.split()
        return "persistentvolumeclaim/persistent-state-for-efi" not in found

    kubevirt.wait_for("the claim to go with its VM", claim_gone, 120)


def _octal(command: bytes) -> str:
    return "".join(f"\\{b:03o}" for b in command)


def _tpm(kubevirt: Any, namespace: str, vm: str, command: bytes) -> str:
    """Send one TPM 2.0 command to the guest's /dev/tpm0; the response code (8 hex digits).

    The guest has no TPM tools: the shell writes the command's bytes in one write and reads
    the response on the same descriptor, as the kernel's TPM character device wants."""
    typed = (
        f"exec 3<>/dev/tpm0; printf '{_octal(command)}' >&3; "
        "echo rc=$(dd bs=4096 count=1 <&3 2>/dev/null | od -An -tx1 -j6 -N4 | tr -d ' '); "
        "exec 3>&-"
    )
    found = re.search(r"rc=([0-9a-f]{8})\b", kubevirt.in_guest(vm, namespace, typed))
    assert found is not None
    return found.group(1)


# TPM2_NV_ReadPublic of NV index 0x01500001 (no sessions).
_READ_PUBLIC = bytes.fromhex("80010000000e0000016901500001")
# TPM2_NV_DefineSpace of that index under the owner hierarchy (empty password session):
# 8 bytes, owner read and write.
_DEFINE = bytes.fromhex(
    "80020000002d0000012a40000001000000094000000900000000000000000e01500001000b0002000200000008"
)
_SUCCESS, _HANDLE, _NV_DEFINED = "00000000", "0000018b", "0000014c"


def test_a_persistent_tpms_state_survives_a_restart_on_the_vms_claim(
    kubevirt: Any, namespace: str
) -> None:
    vm: dict[str, Any] = kubevirt.vm("tpm")
    vm["spec"]["template"]["spec"]["domain"]["devices"]["tpm"] = {"persistent": True}
    kubevirt.apply(vm, namespace)
    first = kubevirt.wait_running("tpm", namespace)
    assert kubevirt.marker in kubevirt.console_marker("tpm", namespace, timeout=180)
    # A new TPM (swtpm_setup made it): the index does not exist; then the guest defines it.
    assert _tpm(kubevirt, namespace, "tpm", _READ_PUBLIC) == _HANDLE
    assert _tpm(kubevirt, namespace, "tpm", _DEFINE) == _SUCCESS
    assert _tpm(kubevirt, namespace, "tpm", _READ_PUBLIC) == _SUCCESS

    kubevirt.stop("tpm", namespace)
    started = kubevirt.virtctl("start", "tpm", "-n", namespace)
    assert started.returncode == 0, started.stderr
    second = kubevirt.wait_running("tpm", namespace)
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert kubevirt.marker in kubevirt.console_marker("tpm", namespace, timeout=180)
    # The TPM the new guest sees is the one the first guest changed.
    assert _tpm(kubevirt, namespace, "tpm", _READ_PUBLIC) == _SUCCESS
    assert _tpm(kubevirt, namespace, "tpm", _DEFINE) == _NV_DEFINED

    claim = kubevirt.get("pvc", "persistent-state-for-tpm", namespace)
    assert claim is not None
    assert claim["metadata"]["ownerReferences"][0]["kind"] == "VirtualMachine"
    kubevirt.kubectl.run("delete", "vm", "tpm", "-n", namespace, "--wait=true")
