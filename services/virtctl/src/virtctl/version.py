"""The client's version, from the installed distribution's metadata."""

from __future__ import annotations

import platform
from importlib import metadata

__all__ = ["client_version", "client_version_info"]


def client_version() -> str:
    """``v<version>`` of the installed virtctl distribution (``v0.0.0-unknown`` if absent)."""
    try:
        return "v" + metadata.version("virtctl")
    except metadata.PackageNotFoundError:
        return "v0.0.0-unknown"


def client_version_info() -> dict[str, str]:
    """Version details, shaped like upstream's version.Info where it makes sense."""
    return {
        "gitVersion": client_version(),
        "platform": f"{platform.system().lower()}/{platform.machine()}",
        "pythonVersion": platform.python_version(),
        "implementation": "kubevirt-py",
    }
