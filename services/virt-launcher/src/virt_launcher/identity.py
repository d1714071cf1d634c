"""Which VMI this launcher serves; every request is checked against it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NewType

__all__ = ["VmiIdentity", "VmiUid"]

VmiUid = NewType("VmiUid", str)


@dataclass(frozen=True)
class VmiIdentity:
    """Namespace, name and uid of the one VMI a launcher serves."""

    namespace: str
    name: str
    uid: VmiUid

    @property
    def domain_name(self) -> str:
        """libvirt's name for the VMI's domain: ``<namespace>_<name>``."""
        return f"{self.namespace}_{self.name}"
