"""Errors of the launcher's libvirt facade; callers never see ``libvirt.libvirtError``."""

from __future__ import annotations

__all__ = [
    "DomainNotFoundError",
    "DomainStateError",
    "LibvirtError",
    "LibvirtUnavailableError",
]


class LibvirtError(Exception):
    """libvirt refused or failed an operation; ``code`` is libvirt's virErrorNumber."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class DomainNotFoundError(LibvirtError):
    """The domain does not exist (never defined, or undefined)."""


class DomainStateError(LibvirtError):
    """The operation does not fit the domain's state (e.g. pausing a stopped guest)."""


class LibvirtUnavailableError(LibvirtError):
    """libvirtd cannot be reached (not started yet, or gone)."""
