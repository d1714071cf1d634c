"""Checks that the host has the programs and files a build needs, naming the Debian package."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

__all__ = ["HostError", "missing_packages", "require_tools"]


class HostError(RuntimeError):
    """The host lacks something a build needs, or a host program failed; the message says which."""


def missing_packages(
    tools: Mapping[str, str],
    paths: Mapping[str, Path] | None = None,
    files: Mapping[Path, str] | None = None,
) -> list[str]:
    """Debian packages (sorted, unique) whose program or file is absent.

    `tools` maps a program name to its package; `paths` pins a program to a path;
    `files` maps a file that must exist to its package.
    """
    paths = paths or {}
    missing: set[str] = set()
    for tool, package in tools.items():
        pinned = paths.get(tool)
        found = pinned.is_file() if pinned else shutil.which(tool) is not None
        if not found:
            missing.add(package)
    for path, package in (files or {}).items():
        if not path.exists():
            missing.add(package)
    return sorted(missing)


def require_tools(
    tools: Mapping[str, str],
    paths: Mapping[str, Path] | None = None,
    files: Mapping[Path, str] | None = None,
) -> None:
    """Raise HostError with the apt-get command that installs whatever is missing."""
    missing = missing_packages(tools, paths, files)
    if missing:
        raise HostError(
            f"missing Debian package(s): {', '.join(missing)}; install with "
            f"`apt-get install {' '.join(missing)}` (or `make setup`, which reads "
            "tools/host-packages.txt)"
        )
