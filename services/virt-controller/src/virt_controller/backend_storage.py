"""Backend storage: the PVC that keeps a VM's persistent EFI variables across restarts.

As upstream (`pkg/storage/backend-storage`): a VMI with `firmware.bootloader.efi.persistent`
(or `devices.tpm.persistent`) gets a 10Mi Filesystem claim `persistent-state-for-<name>`,
labelled `persistent-state-for: <name>`, owned by its VM (so it lives as long as the VM,
not one run of it) in the KubeVirt CR's `vmStateStorageClass` (else the cluster's default).
virt-controller creates it before the launcher pod, which mounts it where the launcher keeps
the EFI variable store (`LauncherLayout.persistent_nvram_dir`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kube_runtime import RawObject

from .objects import controller_owner, mapping, meta

__all__ = [
    "BACKEND_STORAGE_LABEL",
    "BACKEND_STORAGE_PREFIX",
    "BACKEND_STORAGE_SIZE",
    "FAILED_BACKEND_STORAGE",
    "backend_claim",
    "backend_claim_name",
    "needs_backend_storage",
]

BACKEND_STORAGE_PREFIX: Final = "persistent-state-for-"
BACKEND_STORAGE_LABEL: Final = "persistent-state-for"
BACKEND_STORAGE_SIZE: Final = "10Mi"
#: The VMI's Synchronized reason (and the Event's) when the claim cannot be made.
FAILED_BACKEND_STORAGE: Final = "FailedBackendStorageCreate"


def needs_backend_storage(vmi: RawObject) -> bool:
    """Whether the VMI keeps EFI variables or TPM state across restarts."""
    domain = mapping(mapping(vmi.get("spec")).get("domain"))
    efi = mapping(mapping(mapping(domain.get("firmware")).get("bootloader")).get("efi"))
    tpm = mapping(mapping(domain.get("devices")).get("tpm"))
    return efi.get("persistent") is True or tpm.get("persistent") is True


def backend_claim_name(vmi: RawObject) -> str:
    """`persistent-state-for-<VM name>` (a VM's VMI has its name)."""
    return f"{BACKEND_STORAGE_PREFIX}{meta(vmi).get('name')}"


def backend_claim(vmi: RawObject, storage_class: str | None) -> dict[str, Any]:
    """The claim to create for `vmi`: owned by its VM, else by the VMI itself (whose state
    then lasts one run)."""
    m = meta(vmi)
    owner: Mapping[str, Any] | None = controller_owner(vmi)
    if owner is None or owner.get("kind") != "VirtualMachine":
        owner = {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "name": m.get("name"),
            "uid": m.get("uid"),
        }
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "volumeMode": "Filesystem",
        "resources": {"requests": {"storage": BACKEND_STORAGE_SIZE}},
    }
    if storage_class:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": backend_claim_name(vmi),
            "namespace": m.get("namespace"),
            "labels": {BACKEND_STORAGE_LABEL: str(m.get("name"))},
            "ownerReferences": [
                {
                    "apiVersion": str(owner.get("apiVersion")),
                    "kind": str(owner.get("kind")),
                    "name": str(owner.get("name")),
                    "uid": str(owner.get("uid")),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }
