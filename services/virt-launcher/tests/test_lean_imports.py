"""The launcher, one process per VM, loads only what every VM needs: not aiohttp (0.26 s
and 13 MiB per start), not pycdlib (2 MiB) until a VM has an ISO to build, not dateutil
(the protocol's Timestamp needs it only to parse JSON); its head start (libvirtd before
the imports) loads nothing heavy."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("package", ["aiohttp", "pycdlib", "dateutil"])
def test_the_launcher_entry_point_does_not_load(package: str) -> None:
    probe = (
        "import sys, virt_launcher.main, virt_launcher.converter; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] == {package!r}))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "[]"


def test_the_head_start_loads_nothing_heavy_before_libvirtd_starts() -> None:
    # It runs before the launcher's imports; what it loads delays libvirtd's start.
    heavy = ("asyncio", "grpclib", "betterproto2", "kubevirt_api", "marshmallow", "libvirt")
    probe = (
        "import sys, virt_launcher.headstart; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r}))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "[]"
