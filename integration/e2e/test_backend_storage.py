"""Backend storage: a VM with persistent EFI keeps an EFI variable its guest wrote across a
stop and a start (OVMF's variable store on the VM's `persistent-state-for-<vm>` claim),
and the claim goes with the VM."""

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
